"""Plug-in for the power test of docs/decide.md: another algorithm made slower by a known factor.

`slowed:of=pairwise:extra=0.3` runs pairwise's own plan (the same executor as `pairwise`), then spins for 30 %
of the time that call took on this rank: a twin about 1.3x slower by construction, which the verdicts must find.
Plain twins (one schedule under other names) need no plug-in: `bench run --aa` sweeps them.

    mpirun -n 2 python -m bench run --plugin examples/twins.py \\
        --algorithms native,pairwise,slowed:of=pairwise:extra=0.3 --sizes 8:64K:x4
"""
import time

import a2a


@a2a.register("slowed")
def slowed(comm, sendbuf, recvbuf, *, of: str = "pairwise", extra: float = 0.3):
    """`of`'s plan, then a spin of `extra` times the call's own time on this rank."""
    plan = a2a.get(of).plan(comm, sendbuf, recvbuf)
    clock = time.perf_counter

    def run():
        began = clock()
        plan()
        until = clock() + extra * (clock() - began)
        while clock() < until:
            pass
    return run, plan.free
