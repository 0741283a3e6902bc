"""Headless Chromium driven through its DevTools protocol, with the standard library only.

`Browser().check(url)` opens a page and tells what a person would see: which images loaded, what
the console said, and a screenshot of the whole page. Chromium is Debian's package
(.ci/setup.d/browser.sh installs it); `find()` says where it is, or None.
"""
from __future__ import annotations

import base64
import ctypes
import http.server
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome")
# No sandbox as root; nothing in the background that would reach for a network this machine does not have
FLAGS = ["--headless", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--mute-audio"]
IMAGES = "JSON.stringify([...document.images].map(i => [i.getAttribute('src'), i.naturalWidth, i.naturalHeight]))"
WIDTH, HEIGHT = 1400, 900


def find() -> str | None:
    """The Chromium this machine has, or None."""
    return next((path for name in NAMES if (path := shutil.which(name))), None)


@dataclass
class Report:
    """What a page showed: its images (src, natural width and height), console errors, page size, screenshot."""

    images: list[tuple[str, int, int]]
    errors: list[str]
    width: int  # the page's scroll width, CSS pixels
    screenshot: bytes = field(repr=False)  # PNG of the whole page
    title: str = ""
    text: str = field(default="", repr=False)

    def problems(self) -> list[str]:
        """Everything a reader would see as broken: images that did not load, console errors, sideways scroll."""
        broken = [f"image {src} did not load" for src, w, h in self.images if not (w and h)]
        wide = [f"the page is {self.width} px wide in a {WIDTH} px window"] if self.width > WIDTH else []
        return broken + [f"console: {e}" for e in self.errors] + wide


class Socket:
    """A WebSocket client, text frames only: what the DevTools protocol needs."""

    def __init__(self, url: str) -> None:
        host, _, path = url.removeprefix("ws://").partition("/")
        name, _, port = host.partition(":")
        self.sock = socket.create_connection((name, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += self.sock.recv(4096)
        head, _, self.pending = reply.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError(head.decode(errors="replace"))

    def send(self, text: str) -> None:
        data, mask = text.encode(), os.urandom(4)
        size = len(data)
        head = struct.pack("!BB", 0x81, 0x80 | size) if size < 126 else \
            struct.pack("!BBH", 0x81, 0xFE, size) if size < 1 << 16 else struct.pack("!BBQ", 0x81, 0xFF, size)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def receive(self) -> str:
        """The next whole text message (fragments joined; pings answered)."""
        message = b""
        while True:
            first, second = self.read(2)
            size = second & 0x7F
            if size >= 126:
                size = struct.unpack("!H" if size == 126 else "!Q", self.read(2 if size == 126 else 8))[0]
            payload, opcode = self.read(size), first & 0x0F
            if opcode == 0x8:
                raise ConnectionError("the browser closed the connection")
            if opcode == 0x9:
                self.sock.sendall(struct.pack("!BB", 0x8A, 0x80 | len(payload)) + bytes(4) + payload)
                continue
            message += payload
            if first & 0x80:
                return message.decode()

    def read(self, count: int) -> bytes:
        while len(self.pending) < count:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the browser went away")
            self.pending += chunk
        out, self.pending = self.pending[:count], self.pending[count:]
        return out


class Browser:
    """One headless Chromium with one page, spoken to over the DevTools protocol."""

    def __init__(self, executable: str | None = None) -> None:
        self.profile = tempfile.mkdtemp(prefix="a2a-chromium-")
        flags = FLAGS + (["--no-sandbox"] if os.geteuid() == 0 else [])
        self.log = open(Path(self.profile) / "stderr.log", "w")
        self.process = subprocess.Popen(
            [executable or find() or "chromium", *flags, f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", f"--window-size={WIDTH},{HEIGHT}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=self.log, preexec_fn=die_with_parent)
        self.socket = Socket(self.page_socket())
        self.serial = 0
        self.events: list[dict[str, Any]] = []  # what the page said between replies

    def page_socket(self, timeout: float = 30) -> str:
        """The WebSocket address of the browser's first page, once it listens."""
        port_file, deadline = Path(self.profile) / "DevToolsActivePort", time.monotonic() + timeout
        while not port_file.is_file() or not port_file.read_text().strip():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Chromium did not start: {(Path(self.profile) / 'stderr.log').read_text()[-2000:]}")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            targets = json.load(answer)
        return next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")

    def call(self, method: str, **params: Any) -> dict:
        """Send one command and wait for its answer; events that arrive meanwhile are kept."""
        self.serial += 1
        self.socket.send(json.dumps({"id": self.serial, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.receive())
            if message.get("id") == self.serial:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 60) -> None:
        """Read events until `method` arrives."""
        self.socket.sock.settimeout(timeout)
        while not any(e.get("method") == method for e in self.events):
            self.events.append(json.loads(self.socket.receive()))

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def check(self, url: str) -> Report:
        """Open `url`, wait for it and everything it loads, and report what it showed."""
        self.events = []
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        images = [tuple(i) for i in json.loads(self.evaluate(IMAGES))]
        width = self.evaluate("document.documentElement.scrollWidth")
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        return Report(images, console_errors(self.events), width, base64.b64decode(shot["data"]),
                      self.evaluate("document.title"), self.evaluate("document.body.innerText"))

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def die_with_parent() -> None:
    """In the browser's process, before it starts: Linux ends it when the tests' process ends, however that ends."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def console_errors(events: list[dict]) -> list[str]:
    """Errors the page's console showed: failed loads, uncaught exceptions, console.error."""
    out = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            out.append(f"{entry['text']} ({entry.get('url', '')})")
        elif method == "Runtime.exceptionThrown":
            out.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and params["type"] == "error":
            out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
    return out


@contextmanager
def served(directory: Path) -> Iterator[str]:
    """`directory` served over HTTP on 127.0.0.1 while inside; its address."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(directory), **kwargs)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
