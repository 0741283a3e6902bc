"""A plug-in that refuses some sizes on every rank: at 64 B per peer when planned, at 1 KiB when called."""
import a2a


@a2a.register("picky")
def picky(comm, sendbuf, recvbuf):
    """Alltoall, but a ValueError at 64 B per peer (planning) and a RuntimeError at 1 KiB (the call)."""
    size = sendbuf.nbytes // comm.size
    if size == 64:
        raise ValueError("picky plug-in: 64 B per peer refused on purpose\nsecond line of the message")

    def run():
        if size == 1024:
            raise RuntimeError("picky plug-in: 1 KiB per peer fails on purpose")
        comm.Alltoall(sendbuf, recvbuf)
    return run
