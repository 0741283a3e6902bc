"""Another algorithm under a second name: the sweep's control, which measures the noise floor.

A sweep times `control` (of `native`, by default) in every cell beside the library's own, visited like any
candidate: the two run one schedule, so whatever their ratio shows is what identical schedules differ by on
this machine today, and a decision never calls a smaller margin a win. `of=ALGORITHM` makes a control of any
other algorithm, and `twin` tells several apart: `bench run --aa` races pairwise against two such twins (an
A/A test the statistics must pass). The sweep plans a control exactly as it plans `of` (`stand_in`: the same
options, the same executor); it is never a candidate of a decision.
"""
from typing import Any

from a2a.algos.registry import get, known, register
from a2a.errors import BadOption
from a2a.record.results import CONTROL
from a2a.record.results import NATIVE as OF_DEFAULT


def _other(name: str) -> bool:
    return name not in (CONTROL, "auto") and known(name) is not None


LIMITS = {"of": (_other, "a registered algorithm other than control and auto"),
          "twin": (lambda twin: twin >= 1, "1 or more")}


def stand_in(name: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The algorithm and options a sweep plans for a variant: a control's `of` with the options it passes on
    (native's form), any other as it is."""
    if name != CONTROL:
        return name, options
    of = str(options.get("of", OF_DEFAULT))
    return of, ({"form": options["form"]} if of == OF_DEFAULT and "form" in options else {})


def _factory(collective: str, comm: Any, sendbuf: Any, recvbuf: Any, of: str, form: str) -> Any:
    algorithm = get(of)
    if collective not in algorithm.kinds:
        raise BadOption(f"control: of={of} does not serve {collective}")
    return algorithm.kinds[collective].factory(comm, sendbuf, recvbuf, **({"form": form} if of == OF_DEFAULT else {}))


@register(CONTROL, mirrors="another algorithm (native by default) under a second name: the noise floor",
          limits=LIMITS, candidate=False, simplicity=0, intercomm=True, in_place=True, exact=False)
def control(comm, sendbuf, recvbuf, *, of: str = OF_DEFAULT, twin: int = 1, form: str = "blocking"):
    """Run `of` (the library's own by default) as it runs under its own name."""
    return _factory("alltoall", comm, sendbuf, recvbuf, of, form)


@register(CONTROL, collective="alltoallv", mirrors="another algorithm (native by default) under a second name",
          limits=LIMITS, candidate=False, simplicity=0, intercomm=True, in_place=True, exact=False)
def control_v(comm, send, recv, *, of: str = OF_DEFAULT, twin: int = 1, form: str = "blocking"):
    """Run `of`'s alltoallv (the library's own by default) as it runs under its own name."""
    return _factory("alltoallv", comm, send, recv, of, form)
