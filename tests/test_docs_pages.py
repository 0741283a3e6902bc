"""The reference pages stay short enough to read, and their examples write where git ignores it."""
from __future__ import annotations

import re
import subprocess

import pytest
from support import ROOT

MOST_LINES = 450
PAGES = sorted((ROOT / "docs").glob("*.md"))  # the reference pages (findings/ are dated reports)
PLACEHOLDER = re.compile(r"^[A-Z_]+$|DIR")  # -o FILE, --output DIR: the reader's to name
WRITTEN = re.compile(r"(?:\s-o|--output)[ =](\S+?)[`\s]")  # what a `bench` command writes


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_reference_page_stays_under_450_lines(page):
    assert len(page.read_text().splitlines()) <= MOST_LINES, f"{page.name}: split it by topic"


@pytest.mark.parametrize("name", ["decide.md", "alltoallv.md", "overlap.md", "simulation.md", "simgrid.md"])
def test_examples_write_under_an_ignored_folder_each_to_a_file_of_its_own(name):
    page = ROOT / "docs" / name
    if not page.exists():
        pytest.skip(f"no {name}")
    written = [w for line in page.read_text().splitlines() if "bench " in line for w in WRITTEN.findall(line + " ")]
    kept = subprocess.run(["git", "check-ignore", "--no-index", *written], cwd=ROOT, capture_output=True, text=True)
    ignored = set(kept.stdout.split())
    assert [w for w in written if w not in ignored and not PLACEHOLDER.search(w)] == [], name


def test_no_two_pages_write_the_same_file():
    by_file: dict[str, set[str]] = {}
    for page in ("decide.md", "alltoallv.md", "overlap.md"):
        text = (ROOT / "docs" / page).read_text()
        for line in text.splitlines():
            for written in WRITTEN.findall(line + " ") if "bench " in line and " -o" in line else []:
                by_file.setdefault(written, set()).add(page)
    assert {f: pages for f, pages in by_file.items() if len(pages) > 1} == {}
