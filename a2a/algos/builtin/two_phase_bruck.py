"""Two-phase Bruck for uneven blocks (Fan et al., HPDC'22): each round sends its blocks' sizes, then the blocks.

Index i of rank r holds the block that travels i ranks forward (from r to r + i); round
(distance, digit) forwards every index whose base-radix digit at `distance` is `digit` by
digit x distance ranks. A block is home once its digits so far add up to i. TuNA (tuna.py)
runs the same rounds at any radix.

Cost on a count matrix: Bruck's rounds replayed on the real sizes: each round costs two
latencies (sizes, then data) and the largest bytes any rank forwards in it.
"""
import numpy as np

from a2a.algos.builtin.bruck import bruck_rounds
from a2a.algos.builtin.padded_bruck import global_max
from a2a.algos.cost import MatrixCost
from a2a.algos.prebuilt import copier, copy_function
from a2a.algos.registry import register


def forwarded(counts: np.ndarray, itemsize: int, radix: int, direct: bool) -> dict[str, float]:
    """Replay the uneven Bruck rounds: held[r][i] is the size rank r holds at index i."""
    sizes = counts * itemsize
    p = len(sizes)
    held = np.array([[sizes[r, (r + i) % p] for i in range(p)] for r in range(p)], dtype=float)
    rounds = total = 0.0
    for distance, digit, moved in bruck_rounds(p, radix):
        step = digit * distance
        total += held[:, moved].sum(axis=1).max()
        rounds += 1 if direct and len(moved) == 1 else 2  # sizes first, then data
        held[:, moved] = np.roll(held[:, moved], step, axis=0)  # rank r now holds what r - step held
    return {"rounds": rounds, "bytes": total}


@register("two_phase_bruck", collective="alltoallv",
          mirrors="two-phase Bruck (Fan et al., HPDC'22, harp-lab/bruck-alltoallv)",
          cost=MatrixCost("radix-2 Bruck rounds on the real sizes, two latencies each",
                          lambda counts, itemsize, options: forwarded(counts, itemsize, 2, direct=False)),
          simplicity=17)
def two_phase_bruck(comm, send, recv):
    """Radix-2 Bruck; each round first exchanges the sizes of the blocks it moves, then the blocks."""
    return uneven_bruck(comm, send, recv, 2, direct=False)


def uneven_bruck(comm, send, recv, radix: int, direct: bool):
    """Two-phase Bruck rounds (sizes, then data); `direct`: single-block rounds go point to point."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    width = global_max(comm, send)
    outgoing_blocks, home = send.blocks(), recv.blocks()
    mine = [outgoing_blocks[(r + i) % p] for i in range(p)]  # index i: the block for r + i
    spare = np.empty((p, width), np.uint8)  # index i's block once it has been forwarded here
    rounds = bruck_rounds(p, radix)
    most = max((len(m) for *_, m in rounds), default=0)
    packed_out, packed_in = np.empty(most * width, np.uint8), np.empty(most * width, np.uint8)
    sizes_out, sizes_in = np.empty(most, np.int64), np.empty(most, np.int64)
    # TuNA waits for a digit's point-to-point rounds when the digit is done
    digit_done = [k + 1 == len(rounds) or rounds[k + 1][0] != d for k, (d, _, _) in enumerate(rounds)]
    sendrecv, copy, own = comm.Sendrecv, copy_function(), copier(home[r], mine[0])
    start, waitall = MPI.Prequest.Startall, MPI.Request.Waitall
    # a direct round's one block is still at its source and goes home: two persistent requests
    posted = [[comm.Recv_init(home[(r - moved[0]) % p], (r - digit * distance) % p, 1),
               comm.Send_init(mine[moved[0]], (r + digit * distance) % p, 1)]
              if direct and len(moved) == 1 else [] for distance, digit, moved in rounds]

    def run():
        held = list(mine)
        own()
        pending = []
        for (distance, digit, moved), requests, last in zip(rounds, posted, digit_done):
            if requests:
                start(requests)
                pending += requests
            else:
                _forward(sendrecv, copy, held, moved, (r + digit * distance) % p, (r - digit * distance) % p,
                         sizes_out, sizes_in, packed_out, packed_in, spare, home, r, p, distance * radix)
            if last and pending:
                waitall(pending)
                pending.clear()

    return run, lambda: [q.Free() for requests in posted for q in requests]


def _forward(sendrecv, copy, held, moved, dst, src, sizes_out, sizes_in, packed_out, packed_in,
             spare, home, r, p, settled):
    """One round: sizes, then the packed blocks; blocks with index below `settled` are home."""
    m = len(moved)
    offset = 0
    for k, i in enumerate(moved):
        n = len(held[i])
        sizes_out[k] = n
        copy(packed_out[offset: offset + n], held[i])
        offset += n
    sendrecv(sizes_out[:m], dst, 0, sizes_in[:m], src, 0)
    sendrecv(packed_out[:offset], dst, 1, packed_in[: int(sizes_in[:m].sum())], src, 1)
    offset = 0
    for k, i in enumerate(moved):
        n = int(sizes_in[k])
        into = home[(r - i) % p] if i < settled else spare[i, :n]
        copy(into, packed_in[offset: offset + n])
        held[i] = into
        offset += n
