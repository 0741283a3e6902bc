"""Dimension-wise all-to-all (Traff et al.): one MPI_Alltoall per dimension of a factorisation of p.

The ranks form a row-major d-dimensional grid n_1 x ... x n_d (a Cartesian communicator).
Each rank views its buffers as d-dimensional arrays of blocks. In phase k every rank calls
MPI_Alltoall on the ranks of its line along dimension k; what goes to the peer with
coordinate e is the sub-array with index e in dimension k (a subarray datatype, resized so
that peer e's part starts e strides along), and what comes from it lands at index e of the
same dimension. A block from s to t starts at index t, sits at the rank (t_1..t_k,
s_k+1..s_d) at index (s_1..s_k, t_k+1..t_d) after phase k, and so at the end at rank t,
index s. The phases alternate between the receive buffer and one temporary buffer so that
the last writes the receive buffer: no block is ever copied by us.
"""
from __future__ import annotations

import math
import re

import numpy as np

from a2a.algos.buffers import blocks
from a2a.algos.cost import Formula, Placement
from a2a.algos.registry import register
from a2a.algos.schedule import Among, Phases
from a2a.errors import BadOption

DIMS = re.compile(r"auto|[1-9]\d*(x[1-9]\d*)*")


def factors(dims: str, p: int) -> list[int]:
    """The grid's extents: `auto` is two factors as even as can be (MPI_Dims_create's); extents of 1 dropped."""
    if dims == "auto":
        extents = balanced(p)
    else:
        extents = [int(n) for n in dims.split("x")]
        if math.prod(extents) != p:
            example = "x".join(map(str, balanced(p)))
            raise BadOption(f"dimensional: dims={dims} makes {math.prod(extents)} processes, not {p}; "
                            f"accepted: auto, or extents whose product is {p} (e.g. {example})")
    return [n for n in extents if n > 1] or [1]


def balanced(p: int) -> list[int]:
    """p as two factors as even as can be, larger first (p alone if prime), as MPI_Dims_create(p, 2)."""
    small = max(d for d in range(1, math.isqrt(p) + 1) if p % d == 0)
    return [p // small, small] if small > 1 else [p]


def terms(s: Placement, m: float, options: dict) -> dict[str, float]:
    """sum_k [(n_k - 1) alpha + (n_k - 1) (p/n_k) m beta] + 2 d p m gamma.

    Phase k is an MPI_Alltoall among the n_k ranks of a line, p/n_k blocks per peer, taken as a
    direct exchange (n_k - 1 messages); the subarray datatypes read and write the whole buffer
    once per phase (MPI packs and unpacks them). A grid of another size predicts auto's.
    """
    p, dims = s.nprocs, options["dims"]
    fixed = dims != "auto" and math.prod(int(n) for n in dims.split("x")) == p
    extents = factors(dims, p) if fixed else balanced(p)
    return {"alpha": sum(n - 1 for n in extents), "beta": sum((n - 1) * p / n for n in extents) * m,
            "gamma": 2 * len(extents) * p * m}


def steps(p: int, r: int, dims: str) -> Phases:
    """What the factory runs on rank r, as data: per dimension, one Alltoall among the ranks of r's line along it
    (the row-major grid's), p / n_k blocks to each."""
    extents = factors(dims, p)
    found = []
    for k, n in enumerate(extents):
        stride = math.prod(extents[k + 1:])
        first = r - (r // stride % n) * stride
        each = (p // n,) * n
        found.append(Among("alltoall", tuple(range(first, first + n * stride, stride)), None, each, each))
    return Phases(tuple(found))


@register("dimensional", mirrors="Traff's dimension-wise all-to-all on a Cartesian grid (one MPI_Alltoall "
          "per dimension, reordering by derived datatypes); source: Traff et al., arXiv 1910.13373",
          limits={"dims": (lambda s: bool(DIMS.fullmatch(s)), "auto, or extents such as 4x2 or 2x2x2 "
                           "whose product is the process count")},
          cost=Formula("sum_k (n_k-1) (alpha + p/n_k m beta) + 2 d p m gamma  (grid n_1 x .. x n_d)",
                       ("alpha", "beta", "gamma"), terms),
          steps=steps, simplicity=9)
def dimensional(comm, sendbuf, recvbuf, *, dims: str = "auto"):
    """One Alltoall per grid dimension (Cartesian sub-communicators); subarray datatypes reorder."""
    from mpi4py import MPI

    p = comm.size
    extents = factors(dims, p)
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    width = send.shape[1]
    temp = np.empty_like(recv) if len(extents) > 1 else recv
    grid = comm.Create_cart(extents, periods=[False] * len(extents), reorder=False)
    block = MPI.BYTE.Create_contiguous(width).Commit()
    phases = []
    for k in range(len(extents)):
        line = grid.Sub([i == k for i in range(len(extents))])
        stride = math.prod(extents[k + 1:]) * width  # bytes between indices e and e+1 of dimension k
        part = block.Create_subarray(extents, [1 if i == k else n for i, n in enumerate(extents)],
                                     [0] * len(extents))
        layout = part.Create_resized(0, stride).Commit()
        part.Free()
        phases.append((line, layout))
    # the last phase writes recv; going back, the phases alternate between temp and recv
    targets = [recv if (len(extents) - 1 - k) % 2 == 0 else temp for k in range(len(extents))]
    sources = [send] + targets[:-1]
    count = 1 if width else 0  # empty buffers may share an address, which MPI refuses as aliased unless nothing moves
    steps = [(line.Alltoall, [source, count, layout], [target, count, layout])
             for (line, layout), source, target in zip(phases, sources, targets)]

    def run():
        for alltoall, outgoing, incoming in steps:
            alltoall(outgoing, incoming)

    def free():
        for line, layout in phases:
            line.Free()
            layout.Free()
        grid.Free()
        block.Free()

    return run, free
