"""Padded Bruck for uneven blocks (Fan et al., HPDC'22): pad every block to the largest, run uniform Bruck.

Cost on a count matrix: Bruck's rounds, every block sent at the largest block's size.
"""
import numpy as np

from a2a.algos.builtin.bruck import RADIX, bruck, bruck_rounds
from a2a.algos.cost import MatrixCost, option
from a2a.algos.prebuilt import copier
from a2a.algos.registry import register


def global_max(comm, send) -> int:
    """The largest block any rank sends, in bytes (agreed once per plan: a plan's counts are fixed)."""
    from mpi4py import MPI

    return comm.allreduce(int(send.nbytes.max(initial=0)), op=MPI.MAX)


def matrix_terms(counts: np.ndarray, itemsize: int, options: dict) -> dict[str, float]:
    """Bruck's rounds; each sends its blocks at the largest block's size."""
    rounds = bruck_rounds(len(counts), option(options, "radix"))
    width = float((counts * itemsize).max(initial=0))
    return {"rounds": float(len(rounds)), "bytes": sum(len(moved) for *_, moved in rounds) * width}


@register("padded_bruck", collective="alltoallv", limits=RADIX,
          mirrors="padded Bruck (Fan et al., HPDC'22, harp-lab/bruck-alltoallv)",
          cost=MatrixCost("Bruck's rounds, every block at the largest block's size", matrix_terms), simplicity=16)
def padded_bruck(comm, send, recv, *, radix: int = 2):
    """Pad every block to the largest block of any rank, run uniform Bruck, cut the padding off."""
    p, width = comm.size, global_max(comm, send)
    padded_send, padded_recv = np.zeros((p, width), np.uint8), np.zeros((p, width), np.uint8)
    run_bruck, free = bruck(comm, padded_send, padded_recv, radix=radix)
    pad = [copier(padded_send[j, : len(b)], b) for j, b in enumerate(send.blocks())]
    cut = [copier(b, padded_recv[j, : len(b)]) for j, b in enumerate(recv.blocks())]

    def run():
        for copy in pad:
            copy()
        run_bruck()
        for copy in cut:
            copy()

    return run, free
