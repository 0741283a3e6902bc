"""A plug-in that fails on rank 1 only, in the middle of an exchange: the job must end, not hang."""
import a2a


@a2a.register("broken")
def broken(comm, sendbuf, recvbuf):
    """Fail on rank 1 while the other ranks wait in an Alltoall."""
    def run():
        if comm.rank == 1:
            raise RuntimeError("broken plug-in: rank 1 fails on purpose")
        comm.Alltoall(sendbuf, recvbuf)
    return run
