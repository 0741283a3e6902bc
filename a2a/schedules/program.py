"""A schedule as exact data: each rank's program of rounds, and the one file format that holds them.

A program is what one rank does in one all-to-all, whatever the message size: rounds, each of
local copies, then receives and sends posted at once, then a wait for the messages it names (of
this round or an earlier one). Every piece of data is a region in blocks of one of three buffers:
the send buffer (SEND, block i: what goes to rank i), the receive buffer (RECV, block i: what
came from rank i) and a temporary buffer (TEMP, rows of one block). A block is count x extent
bytes in an alltoall, and block i of the call's counts and displacements in an alltoallv, so
the same data serves every size. Message k of a pair of ranks carries tag k: both sides name it.

The file is text, one item per line, so that C reads it with no library (a2a/execute/c/executor.c
reads the same lines):

    a2a-schedule 1
    algorithm bruck radix=2
    nprocs 4
    program RANK temp TEMP_BLOCKS rounds ROUNDS
    round COPIES RECEIVES SENDS WAITS MESSAGE...
    copy BUFFER FIRST BUFFER FIRST BLOCKS
    recv PEER TAG REGIONS BUFFER FIRST BLOCKS ...
    send PEER TAG REGIONS BUFFER FIRST BLOCKS ...
    end CHECKSUM

Each round line is followed by its copies, receives and sends; a wait names messages by their
index in the program (its receives and sends numbered in order). CHECKSUM is the FNV-1a hash
(64 bits, hex) of every byte before the `end` line, so a truncated or altered file is refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from a2a.errors import A2AError

VERSION = 1
MAGIC = "a2a-schedule"
SEND, RECV, TEMP = 0, 1, 2
BUFFERS = ("send", "recv", "temp")


class ScheduleFileError(A2AError):
    """A schedule file that is not one this version wrote, or whose data is out of bounds."""


@dataclass(frozen=True)
class Region:
    """`blocks` blocks of a buffer (SEND, RECV or TEMP) from block `first`."""

    buffer: int
    first: int
    blocks: int


@dataclass(frozen=True)
class Message:
    """A receive from or a send to `peer`, of its regions in order, tagged with its index among the pair's."""

    peer: int
    tag: int
    regions: tuple[Region, ...]


@dataclass(frozen=True)
class Round:
    """Copies (source, target), then receives and sends posted at once, then a wait for the messages named."""

    copies: tuple[tuple[Region, Region], ...]
    receives: tuple[Message, ...]
    sends: tuple[Message, ...]
    waits: tuple[int, ...]


@dataclass(frozen=True)
class Program:
    """One rank's rounds, and the temporary blocks they use."""

    rank: int
    temp: int
    rounds: tuple[Round, ...]


@dataclass(frozen=True)
class ScheduleData:
    """Every rank's program for an algorithm with its options at `nprocs` ranks."""

    algorithm: str
    options: str  # k=v;k=v, as a record writes them
    nprocs: int
    programs: tuple[Program, ...]
    note: str = field(default="", compare=False)  # what the traced plan said (a fallback schedule); not in the file

    @property
    def direct(self) -> bool:
        """Whether every block goes straight to its destination (no temporary buffer): an alltoallv can run it."""
        return all(program.temp == 0 for program in self.programs)


def checksum(data: bytes) -> str:
    """FNV-1a, 64 bits, as 16 hex digits."""
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def _region(region: Region) -> str:
    return f"{region.buffer} {region.first} {region.blocks}"


def dumps(data: ScheduleData) -> str:
    """The schedule as the file's text."""
    lines = [f"{MAGIC} {VERSION}", f"algorithm {data.algorithm} {data.options or '-'}", f"nprocs {data.nprocs}"]
    for program in data.programs:
        lines.append(f"program {program.rank} temp {program.temp} rounds {len(program.rounds)}")
        for round_ in program.rounds:
            lines.append(f"round {len(round_.copies)} {len(round_.receives)} {len(round_.sends)} {len(round_.waits)}"
                         + "".join(f" {w}" for w in round_.waits))
            lines += [f"copy {_region(a)} {_region(b)}" for a, b in round_.copies]
            for word, messages in (("recv", round_.receives), ("send", round_.sends)):
                lines += [f"{word} {m.peer} {m.tag} {len(m.regions)} " + " ".join(map(_region, m.regions))
                          for m in messages]
    body = "\n".join(lines) + "\n"
    return body + f"end {checksum(body.encode())}\n"


def write(data: ScheduleData, path: Path) -> None:
    """Write the schedule's file (whole, then renamed into place)."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(dumps(data))
    partial.replace(path)


def read(path: Path) -> ScheduleData:
    """The schedule in a file; ScheduleFileError, naming the file and what is wrong, if it is not a whole, valid one."""
    try:
        text = Path(path).read_bytes()
    except OSError as error:
        raise ScheduleFileError(f"schedule file {path}: {error.strerror}") from None
    try:
        return loads(text)
    except ScheduleFileError as error:
        raise ScheduleFileError(f"schedule file {path}: {error}") from None


class _Words:
    """The words of a schedule's lines, read in order with what each must be."""

    def __init__(self, lines: list[bytes]):
        self.lines, self.at = lines, 0

    def line(self, keyword: str) -> list[str]:
        if self.at >= len(self.lines):
            raise ScheduleFileError(f"it ends before its {keyword!r} line (truncated)")
        words = self.lines[self.at].decode("ascii", "replace").split()
        self.at += 1
        if not words or words[0] != keyword:
            raise ScheduleFileError(f"line {self.at}: {' '.join(words[:3])!r} where a {keyword!r} line belongs")
        return words[1:]


def _ints(words: list[str], line: int) -> list[int]:
    try:
        return [int(w) for w in words]
    except ValueError:
        raise ScheduleFileError(f"line {line}: {' '.join(words)!r} is not whole numbers") from None


def loads(text: bytes | str) -> ScheduleData:
    """The schedule in a file's text (see the module's docstring); ScheduleFileError if it is not valid."""
    raw = text.encode() if isinstance(text, str) else text
    head = raw.split(b"\n", 1)[0].split()
    if len(head) != 2 or head[0] != MAGIC.encode():
        raise ScheduleFileError(f"not an a2a schedule (it begins {raw[:24]!r}, not {MAGIC!r})")
    if head[1] != str(VERSION).encode():
        raise ScheduleFileError(f"format version {head[1].decode('ascii', 'replace')}; this reader reads {VERSION}")
    end = raw.rfind(b"\nend ")
    if end < 0 or not raw.endswith(b"\n"):
        raise ScheduleFileError("it has no 'end' line (truncated)")
    body, stated = raw[:end + 1], raw[end + 5:].strip().decode("ascii", "replace")
    if checksum(body) != stated:
        raise ScheduleFileError(f"checksum {stated} does not match its contents ({checksum(body)}): altered or cut")
    words = _Words(body.split(b"\n")[1:-1])
    algorithm = words.line("algorithm")
    nprocs = _ints(words.line("nprocs"), words.at)
    if len(algorithm) != 2 or len(nprocs) != 1 or nprocs[0] < 1:
        raise ScheduleFileError("its algorithm or nprocs line is malformed")
    programs = tuple(_program(words, nprocs[0], rank) for rank in range(nprocs[0]))
    if words.at != len(words.lines):
        raise ScheduleFileError(f"line {words.at + 1}: more than {nprocs[0]} programs")
    return ScheduleData(algorithm[0], "" if algorithm[1] == "-" else algorithm[1], nprocs[0], programs)


def _program(words: _Words, nprocs: int, rank: int) -> Program:
    found = words.line("program")
    if len(found) != 5 or found[1] != "temp" or found[3] != "rounds":
        raise ScheduleFileError(f"line {words.at}: a program line is 'program RANK temp N rounds N'")
    number, temp, count = _ints([found[0], found[2], found[4]], words.at)
    if number != rank or temp < 0 or count < 0:
        raise ScheduleFileError(f"line {words.at}: program {number} (temp {temp}, rounds {count}) where rank "
                                f"{rank}'s belongs")
    sizes = {SEND: nprocs, RECV: nprocs, TEMP: temp}
    rounds, messages = [], 0
    for _ in range(count):
        head = _ints(words.line("round"), words.at)
        if len(head) < 4 or len(head) != 4 + head[3] or min(head[:4]) < 0:
            raise ScheduleFileError(f"line {words.at}: a round line is 'round COPIES RECEIVES SENDS WAITS MESSAGE...'")
        copies = tuple(_copy(words, sizes) for _ in range(head[0]))
        receives = tuple(_message(words, "recv", sizes, nprocs) for _ in range(head[1]))
        sends = tuple(_message(words, "send", sizes, nprocs) for _ in range(head[2]))
        messages += head[1] + head[2]
        waits = tuple(head[4:])
        if any(not 0 <= w < messages for w in waits):
            raise ScheduleFileError(f"rank {rank}: a round waits for a message not yet posted ({list(waits)})")
        rounds.append(Round(copies, receives, sends, waits))
    return Program(rank, temp, tuple(rounds))


def _checked(values: list[int], sizes: dict[int, int], line: int) -> Region:
    buffer, first, blocks = values
    if buffer not in sizes or first < 0 or blocks < 0 or first + blocks > sizes[buffer]:
        name = BUFFERS[buffer] if buffer in sizes else f"buffer {buffer}"
        raise ScheduleFileError(f"line {line}: region of {blocks} blocks from block {first} lies outside the {name} "
                                f"buffer ({sizes.get(buffer, 0)} blocks)")
    return Region(buffer, first, blocks)


def _copy(words: _Words, sizes: dict[int, int]) -> tuple[Region, Region]:
    values = _ints(words.line("copy"), words.at)
    if len(values) != 6:
        raise ScheduleFileError(f"line {words.at}: a copy line is 'copy BUFFER FIRST BLOCKS BUFFER FIRST BLOCKS'")
    source, target = _checked(values[:3], sizes, words.at), _checked(values[3:], sizes, words.at)
    if source.blocks != target.blocks:
        raise ScheduleFileError(f"line {words.at}: a copy of {source.blocks} blocks into {target.blocks}")
    return source, target


def _message(words: _Words, keyword: str, sizes: dict[int, int], nprocs: int) -> Message:
    values = _ints(words.line(keyword), words.at)
    if len(values) < 3 or len(values) != 3 + 3 * values[2] or values[2] < 0:
        raise ScheduleFileError(f"line {words.at}: a {keyword} line is '{keyword} PEER TAG REGIONS (BUFFER FIRST "
                                "BLOCKS)...'")
    peer, tag, count = values[:3]
    if not 0 <= peer < nprocs or tag < 0:
        raise ScheduleFileError(f"line {words.at}: peer {peer} (of {nprocs} ranks) or tag {tag} out of range")
    return Message(peer, tag, tuple(_checked(values[3 + 3 * i: 6 + 3 * i], sizes, words.at) for i in range(count)))
