"""The project's own program that lives on all-to-all (c/transpose_sort.c: a 2-D FFT's transpose with MPI_Alltoall
and a sample sort with MPI_Alltoall and MPI_Alltoallv, each with its result checked), compiled with the MPI library's
own mpicc and kept, and its times read back from what it prints."""
from __future__ import annotations

import re
from pathlib import Path

from a2a.errors import HarnessError
from a2a.kept import compiled

SOURCE = Path(__file__).resolve().parent / "c" / "transpose_sort.c"
FLAGS = ["-O2", "-Wall", "-Wextra"]
PHASES = ("transpose", "sample sort")
LINE = re.compile(r"^(transpose|sample sort): .*?: ([\d.]+) us per iteration \(.*? ([\d.]+) us\), .*; check ok$",
                  re.MULTILINE)


def transpose_sort(mpicc: str | None = None) -> Path:
    """The program, compiled (-Wall -Wextra) by the MPI library's own mpicc (or `mpicc`) unless kept already."""
    return compiled([SOURCE], "transpose_sort", FLAGS, mpicc=mpicc)


def phase_times(output: str) -> dict[str, tuple[float, float]]:
    """phase -> (microseconds per iteration, of which in all-to-all calls), from the program's output; HarnessError
    naming the phases missing (a failed check prints no time)."""
    found = {m[1]: (float(m[2]), float(m[3])) for m in LINE.finditer(output)}
    missing = [phase for phase in PHASES if phase not in found]
    if missing:
        raise HarnessError(f"transpose_sort printed no checked time for {', '.join(missing)}:\n"
                           f"{output.strip()[-1500:]}")
    return found
