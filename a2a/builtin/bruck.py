"""Bruck's logarithmic all-to-all for any p and radix (Open MPI modified_bruck, MPICH brucks/k_brucks)."""
import numpy as np

from ..registry import blocks, register


@register("bruck", mirrors="Open MPI modified_bruck (3) at radix 2; MPICH brucks, k_brucks (radix k)",
          limits={"radix": (lambda k: k >= 2, "an integer >= 2")})
def bruck(comm, sendbuf, recvbuf, *, radix: int = 2):
    """Rotate, then per base-`radix` digit send the blocks with that digit to r + digit*k^d; unrotate."""
    from mpi4py import MPI

    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    work = np.empty_like(send)  # work[i] holds the block that must travel i ranks forward
    into_work = np.array([(j - r) % p for j in range(p)])  # work[(j - r) % p] = send[j]
    into_recv = np.array([(r - i) % p for i in range(p)])  # recv[(r - i) % p] = work[i]
    block = MPI.BYTE.Create_contiguous(send.shape[1]).Commit()
    rounds = []
    distance = 1
    while distance < p:
        for digit in range(1, radix):
            moved = [i for i in range(p) if (i // distance) % radix == digit]
            if moved:
                # MPI gathers the outgoing blocks through a datatype, as MPICH's brucks does
                layout = block.Create_indexed_block(1, moved).Commit()
                rounds.append(([work, 1, layout], (r + digit * distance) % p, np.array(moved),
                               np.empty((len(moved), send.shape[1]), np.uint8), (r - digit * distance) % p))
        distance *= radix
    sendrecv = comm.Sendrecv

    def run():
        work[into_work] = send  # scattering rows is several times faster than np.take's gather
        for outgoing, dst, moved, incoming, src in rounds:
            sendrecv(outgoing, dst, 0, incoming, src, 0)
            work[moved] = incoming
        recv[into_recv] = work

    def free():
        for outgoing, *_ in rounds:
            outgoing[2].Free()
        block.Free()

    return run, free
