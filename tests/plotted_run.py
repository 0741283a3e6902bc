"""One real two-rank run and its `bench plot`, made once for the session (every pytest-xdist worker reads the same):
test_plot checks its files and test_report_page opens its page in a browser. Read it, do not change it."""
from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import held, shared_directory
from support import mpiexec, python

# Every figure kind needs native (the speed-ups' baseline) and a second series; the series table is as wide as the
# whole registry's with its two longest variants (locality_aware's and multileader's, 54 characters and more without
# a space), so a page that scrolls sideways still fails. The whole registry adds only panels of the same kinds.
ALGORITHMS = "native,pairwise,bruck,locality_aware,multileader"


@dataclass(frozen=True)
class Plotted:
    """The run's record directory and what `bench plot RECORD` printed (None without matplotlib: not drawn)."""

    run: Path
    stdout: str | None


def plotted_run(tmp_path_factory: pytest.TempPathFactory) -> Plotted:
    """The run of ALGORITHMS at three sizes, plotted into its default place (RECORD/plots) where matplotlib is."""
    made = shared_directory(tmp_path_factory) / "plotted-run"
    drawn = importlib.util.find_spec("matplotlib") is not None
    with held(made.with_suffix(".lock")):
        if not (made / "finished").exists():
            shutil.rmtree(made, ignore_errors=True)  # what a worker that failed to make it left
            done = mpiexec(2, "-m", "bench", "run", "--sizes", "8,1K,64K", "--iterations", "5", "--algorithms",
                           ALGORITHMS, "--output", str(made / "results"), "--quiet", timeout=300)
            assert done.returncode == 0, done.stderr
            if drawn:
                done = python("-m", "bench", "plot", str(made / "results"), timeout=600)  # slow on a loaded machine
                assert done.returncode == 0, done.stderr
                (made / "plot.out").write_text(done.stdout)
            (made / "finished").touch()
    return Plotted(made / "results", (made / "plot.out").read_text() if drawn else None)
