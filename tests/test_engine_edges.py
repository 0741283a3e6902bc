"""The progression engine's edges, in one process: free() and `with` during an exchange, MPI's defaults, calls
with no non-blocking form, an MPI-3 library without MPI_Isendrecv, an MPI error while a round completes."""
from __future__ import annotations

import numpy as np
import pytest
from support import needs_mpich, self_comm

from a2a.algos.registry import Algorithm, Kind
from a2a.execute.engine import EngineComm, Progression
from a2a.execute.planning import prepare


def nonblocking(factory, send=None, recv=None):
    """A plan of `factory` on one rank, prepared non-blocking."""
    send = np.arange(4.0) if send is None else send
    recv = np.zeros(4) if recv is None else recv
    algorithm = Algorithm("edge", {}, {"alltoall": Kind(factory, "an edge")})
    return prepare(self_comm(), algorithm, algorithm.kinds["alltoall"], {}, send, recv, nonblocking=True)


def parked(done: list):
    """A factory whose run posts a receive and a send to itself, parks on them, then says it ended."""
    def factory(comm, send, recv):
        from mpi4py import MPI

        def run():
            requests = [comm.Irecv(recv, 0, 1), comm.Isend(send, 0, 1)]
            MPI.Request.Waitall(requests)
            done.append(True)
        return run
    return factory


def test_free_during_an_exchange_completes_it_first():
    done: list = []
    plan = nonblocking(parked(done))
    plan.start()
    assert plan.progression.active and not done
    plan.free()
    assert done == [True] and plan.progression is None


def test_with_plan_exiting_on_an_exception_completes_the_exchange_and_frees_the_plan():
    done: list = []
    with pytest.raises(RuntimeError):
        with nonblocking(parked(done)) as plan:
            plan.start()
            raise RuntimeError("the program's own error")
    assert done == [True] and plan.progression is None and plan._comm is None


def test_the_engines_receive_defaults_are_mpis_any_source_and_any_tag_with_the_status_filled():
    from mpi4py import MPI

    status = MPI.Status()

    def factory(comm, send, recv):
        def run():
            request = comm.Isend(send, 0, 3)
            comm.Recv(recv, status=status)  # no source, no tag: MPI_ANY_SOURCE, MPI_ANY_TAG
            request.Wait()
        return run
    got = np.zeros(4)
    with nonblocking(factory, recv=got) as plan:
        plan.start()
        plan.wait()
    assert np.array_equal(got, np.arange(4.0))
    assert (status.Get_source(), status.Get_tag()) == (0, 3)


@pytest.mark.parametrize("call", ["Ssend", "Probe"])
def test_a_call_with_no_non_blocking_form_is_found_at_plan_time_and_runs_whole_inside_wait(call):
    def factory(comm, send, recv):
        def synchronous():
            request = comm.Irecv(recv, 0, 2)
            comm.Ssend(send, 0, 2)
            request.Wait()

        def probed():
            sent = comm.Isend(send, 0, 2)
            comm.Probe(0, 2)
            comm.Irecv(recv, 0, 2).Wait()
            sent.Wait()
        return synchronous if call == "Ssend" else probed
    got = np.zeros(4)
    with nonblocking(factory, recv=got) as plan:
        assert plan.progression.in_wait and f"{call} has no non-blocking form" in plan.note
        plan.start()
        assert not got.any()  # nothing ran at start: the whole exchange runs inside wait()
        plan.wait()
    assert np.array_equal(got, np.arange(4.0))


class WithoutIsendrecv:
    """A communicator of an MPI-3 library: everything but MPI_Isendrecv."""

    def __init__(self, real):
        self.real = real

    def Isendrecv(self, *args, **kwargs):
        raise NotImplementedError("MPI_Isendrecv")

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_sendrecv_on_an_mpi3_library_becomes_irecv_and_isend():
    from mpi4py import MPI

    engine = EngineComm(WithoutIsendrecv(self_comm()), MPI)
    send, got = np.arange(4.0), np.zeros(4)
    progression = Progression(lambda: engine.Sendrecv(send, 0, 5, got, 0, 5))
    progression.start()
    progression.wait()
    assert np.array_equal(got, send)


@needs_mpich("Open MPI 5.0.11 completes a receive truncated by a message to itself without MPI_ERR_TRUNCATE")
def test_an_mpi_error_while_a_round_completes_ends_the_exchange_with_it():
    from mpi4py import MPI

    def factory(comm, send, recv):
        from mpi4py import MPI  # the engine's, while the factory prepares

        def run():
            MPI.Request.Waitall([comm.Irecv(recv[:1], 0, 4), comm.Isend(send, 0, 4)])  # 4 sent into room for 1
        return run
    with nonblocking(factory) as plan:
        plan.start()
        with pytest.raises(MPI.Exception):
            plan.wait()
        assert not plan.progression.active  # ended: it may be freed, or started again
        with pytest.raises(MPI.Exception):
            plan.start()
            plan.wait()
