"""A plug-in that notes on rank 0 which of its variants made each call, to test the order of a cell's visits."""
import a2a


@a2a.register("stamped")
def stamped(comm, sendbuf, recvbuf, *, tag: str = "a", path: str = ""):
    """MPI_Alltoall; rank 0 appends its tag to the file at `path` before each call."""
    def run():
        if comm.rank == 0 and path:
            with open(path, "a") as log:
                log.write(tag)
        comm.Alltoall(sendbuf, recvbuf)
    return run
