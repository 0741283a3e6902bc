"""Bruck's logarithmic all-to-all for any p and radix (Open MPI modified_bruck, MPICH brucks/k_brucks)."""
import numpy as np

from ..registry import blocks, register


@register("bruck", mirrors="Open MPI modified_bruck (3) at radix 2; MPICH brucks, k_brucks (radix k)",
          limits={"radix": (lambda k: k >= 2, "an integer >= 2")})
def bruck(comm, sendbuf, recvbuf, *, radix: int = 2):
    """Rotate, then per base-`radix` digit send the blocks with that digit to r + digit*k^d; unrotate."""
    p, r = comm.size, comm.rank
    send, recv = blocks(sendbuf, p), blocks(recvbuf, p)
    work = np.empty_like(send)  # work[i] holds the block that must travel i ranks forward
    rotate = np.array([(r + i) % p for i in range(p)])
    unrotate = np.array([(r - j) % p for j in range(p)])
    rounds = []
    distance = 1
    while distance < p:
        for digit in range(1, radix):
            moved = np.array([i for i in range(p) if (i // distance) % radix == digit])
            if moved.size:
                outgoing, incoming = work[moved], np.empty_like(work[moved])
                rounds.append((moved, outgoing, (r + digit * distance) % p,
                               incoming, (r - digit * distance) % p))
        distance *= radix
    take, sendrecv = np.take, comm.Sendrecv

    def run():
        take(send, rotate, axis=0, out=work)
        for moved, outgoing, dst, incoming, src in rounds:
            take(work, moved, axis=0, out=outgoing)
            sendrecv(outgoing, dst, 0, incoming, src, 0)
            work[moved] = incoming
        take(work, unrotate, axis=0, out=recv)

    return run
