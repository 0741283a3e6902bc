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
# MPI_Alltoallv's: the algorithms whose alltoallv schedule is data (each block sent straight to its peer) at every
# process count (bench list; schedule_of): the Bruck variants and tuna forward blocks, so they are not
DEFAULT_CANDIDATES_V = ("linear", "pairwise", "throttled", "node_aware")
COLLECTIVES = ("alltoall", "alltoallv")
CONTROL = "control"  # the library's own under a candidate's name: an A/A check of the learner
MOST_CANDIDATES = 7  # learn.h: LEARN_ARMS - 1


def defaults(collective: str) -> tuple[str, ...]:
    """The candidates of a collective where none are named."""
    return DEFAULT_CANDIDATES_V if collective == "alltoallv" else DEFAULT_CANDIDATES


def learning(candidates: list[str], nprocs: list[int], ranks_per_node: int, low: int, high: int,
             library: str, collective: str = "alltoall") -> Deployment:
    """A learn file: for `collective` on each process count, sizes low..high (-1: no limit), these candidates."""
    return learned_with_notes({collective: candidates}, nprocs, ranks_per_node, low, high, library)[0]


def learned_with_notes(candidates: dict[str, list[str]], nprocs: list[int], ranks_per_node: int, low: int, high: int,
                       library: str) -> tuple[Deployment, list[str]]:
    """learning() of each collective's candidates, and a line for each set of names that ran as one arm (the same
    schedule as data on a process count)."""
    for names in candidates.values():
        if not 1 <= len(names) <= MOST_CANDIDATES:
            raise BadInput(f"--candidates {','.join(names)}: {len(names)} candidates; accepted: 1 to "
                           f"{MOST_CANDIDATES} algorithms, or '{CONTROL}' (the library's own under another name)")
    if low < 1 or (0 <= high < low):
        raise BadInput(f"--sizes {low}:{high}: accepted: LOW:HIGH bytes per peer with 1 <= LOW <= HIGH (zero-byte "
                       "calls always go to the library)")
    listed = "; ".join(f"{collective} {','.join(names)}" for collective, names in candidates.items())
    made = Deployment(library, [f"learn {listed} (bench deploy --learn)"])
    notes: list[str] = []
    for collective, names in candidates.items():
        for p in nprocs:
            notes += learn_line(made, collective, names, p, ranks_per_node, low, high)
    return made, notes


def learn_line(made: Deployment, collective: str, candidates: list[str], p: int, ranks_per_node: int, low: int,
               high: int) -> list[str]:
    """The learn line of one collective on p ranks appended to `made`; a line for each set of names that are one
    schedule there (one arm: the first name's)."""
    nodes = virtual_nodes(p, ranks_per_node or p, "block")
    indices: list[int] = []
    by_node, arms = False, dict[str, list[str]]()  # an exchange: the names whose schedule it is
    for name in candidates:
        if name == CONTROL:
            indices.append(-1)
            continue
        if name == NATIVE:
            raise BadInput(f"--candidates {name}: the library's own is always explored beside the candidates; "
                           f"accepted: other algorithms, or '{CONTROL}' (the library's own under another name)")
        try:
            shown, text, depends = schedule_of(name, "", p, nodes, collective)
        except (NotExact, A2AError) as why:
            raise BadInput(f"--candidates {name}: its {collective} on {p} ranks is not exact data ({why}); accepted: "
                           "algorithms whose schedule is data (bench list), or 'control'") from None
        exchange = exchange_of(text)
        if exchange in arms:  # the same exchange as an earlier candidate's: one arm, not two
            arms[exchange].append(name)
            continue
        arms[exchange] = [name]
        indices.append(made.schedule_for(shown, text))
        by_node |= depends
    made.learning.append((collective, p, layout_text(nodes, p) if by_node else "*", low, high, tuple(indices)))
    return [f"{collective} on {p} ranks: {' and '.join(names)} are one schedule there: one arm ({names[0]})"
            for names in arms.values() if len(names) > 1]


def exchange_of(text: str) -> str:
    """A schedule's text without what names it (its algorithm line) and its checksum: what it exchanges."""
    return "\n".join(line for line in text.splitlines() if not line.startswith(("algorithm ", "end ")))


def span(sizes: str) -> tuple[int, int]:
    """--sizes LOW:HIGH as (low, high), high -1 where empty (no limit)."""
    low, colon, high = sizes.partition(":")
    if not colon:
        raise BadInput(f"--sizes {sizes}: accepted: LOW:HIGH bytes per peer, e.g. 64K:1M, or 1: for every size")
    return parse_size(low, "--sizes"), parse_size(high, "--sizes") if high.strip() else -1


def learn_file(candidates: str, nprocs: list[int], ranks_per_node: int, sizes: str, output: Path,
               collective: str = "alltoall") -> list[str]:
    """`bench deploy --learn`: write the learn file; what it learns where, and how to run a program with it.
    `candidates` empty: each collective's defaults; `collective`: alltoall, alltoallv or both."""
    if not nprocs:
        raise BadInput("--learn needs --nprocs: the process counts of the program's communicators (schedules are "
                       "made per count)")
    if collective not in (*COLLECTIVES, "both"):
        raise BadInput(f"--collective {collective}: accepted: alltoall, alltoallv or both")
    low, high = span(sizes)
    chosen = COLLECTIVES if collective == "both" else (collective,)
    named = {c: candidates.split(",") if candidates else list(defaults(c)) for c in chosen}
    made, notes = learned_with_notes(named, nprocs, ranks_per_node, low, high, this_library())
    lines = written(made, output)
    counts = ", ".join(map(str, nprocs))
    return [*lines[:-1], *(f"learns MPI_{c.capitalize()} at {span_text(low, high)} on {counts} ranks among the "
                           f"library's own and {', '.join(n)}" for c, n in named.items()), *notes, lines[-1],
            f"run: mpiexec -n {max(nprocs)} env LD_PRELOAD=$(python -m bench deploy --library) A2A_DEPLOY={output} "
            "A2A_LEARN_OUT=learned.a2a A2A_DEPLOY_REPORT=1 ./program"]  # the variables on the ranks (docs/deploy.md)
