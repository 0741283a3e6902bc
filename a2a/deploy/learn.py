"""Learn files: candidates that liba2a explores against the library's own inside a program's calls, and settles among
by its own statistics (c/learn.h); what it learned comes back as `learned` lines (A2A_LEARN_OUT)."""
from __future__ import annotations

from pathlib import Path

from a2a.algos.nodes import virtual_nodes
from a2a.deploy.file import Deployment, layout_text, schedule_of, span_text, this_library, written
from a2a.errors import A2AError, BadInput
from a2a.record.results import NATIVE
from a2a.schedules.tracer import NotExact
from a2a.units import parse_size

# the four algorithms that a decision over powers of two from 8 B to 1 MiB on 16 quiet cores served (MPICH 5.0.2,
# 4 Dec 2026; docs/findings/learn-inside.md): the candidates where none are named
DEFAULT_CANDIDATES = ("bruck", "dimensional", "linear", "linear_sync")
CONTROL = "control"  # the library's own under a candidate's name: an A/A check of the learner
MOST_CANDIDATES = 7  # learn.h: LEARN_ARMS - 1


def learning(candidates: list[str], nprocs: list[int], ranks_per_node: int, low: int, high: int,
             library: str) -> Deployment:
    """A learn file: for MPI_Alltoall on each process count, sizes low..high (-1: no limit), these candidates."""
    if not 1 <= len(candidates) <= MOST_CANDIDATES:
        raise BadInput(f"--learn {','.join(candidates)!r}: {len(candidates)} candidates; accepted: 1 to "
                       f"{MOST_CANDIDATES} algorithms, or '{CONTROL}' (the library's own under another name)")
    if low < 1 or (0 <= high < low):
        raise BadInput(f"--sizes {low}:{high}: accepted: LOW:HIGH bytes per peer with 1 <= LOW <= HIGH (zero-byte "
                       "calls always go to the library)")
    made = Deployment(library, [f"learn {','.join(candidates)} (bench deploy --learn)"])
    for p in nprocs:
        nodes = virtual_nodes(p, ranks_per_node or p, "block")
        indices, by_node = [], False
        for name in candidates:
            if name == CONTROL:
                indices.append(-1)
                continue
            if name == NATIVE:
                raise BadInput(f"--learn {name}: the library's own is always explored beside the candidates; "
                               f"accepted: other algorithms, or '{CONTROL}' (the library's own under another name)")
            try:
                shown, text, depends = schedule_of(name, "", p, nodes, "alltoall")
            except (NotExact, A2AError) as why:
                raise BadInput(f"--learn {name}: on {p} ranks it is not exact data ({why}); accepted: algorithms "
                               "whose schedule is data (bench list), or 'control'") from None
            indices.append(made.schedule_for(shown, text))
            by_node |= depends
        made.learning.append(("alltoall", p, layout_text(nodes, p) if by_node else "*", low, high, tuple(indices)))
    return made


def span(sizes: str) -> tuple[int, int]:
    """--sizes LOW:HIGH as (low, high), high -1 where empty (no limit)."""
    low, colon, high = sizes.partition(":")
    if not colon:
        raise BadInput(f"--sizes {sizes}: accepted: LOW:HIGH bytes per peer, e.g. 64K:1M, or 1: for every size")
    return parse_size(low, "--sizes"), parse_size(high, "--sizes") if high.strip() else -1


def learn_file(candidates: list[str], nprocs: list[int], ranks_per_node: int, sizes: str,
               output: Path) -> list[str]:
    """`bench deploy --learn`: write the learn file; what it learns where, and how to run a program with it."""
    if not nprocs:
        raise BadInput("--learn needs --nprocs: the process counts of the program's communicators (schedules are "
                       "made per count)")
    low, high = span(sizes)
    made = learning(candidates, nprocs, ranks_per_node, low, high, this_library())
    lines = written(made, output)
    return [*lines[:-1], f"learns MPI_Alltoall at {span_text(low, high)} on {', '.join(map(str, nprocs))} ranks "
            f"among the library's own and {', '.join(candidates)}", lines[-1],
            f"run: mpiexec -n {max(nprocs)} env LD_PRELOAD=$(python -m bench deploy --library) A2A_DEPLOY={output} "
            "A2A_LEARN_OUT=learned.a2a A2A_DEPLOY_REPORT=1 ./program"]  # the variables on the ranks (docs/deploy.md)
