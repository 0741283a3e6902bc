"""An algorithm's options: the keyword-only parameters of its factory, their defaults and accepted values."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from a2a.errors import BadOption, PluginError, accepted_kind

Limit = tuple[Callable[[Any], bool], str]  # (predicate, what is accepted)


@dataclass(frozen=True)
class Option:
    """One keyword option of an algorithm: its default, and which values it accepts."""

    name: str
    default: Any
    limit: Limit | None = None

    def parse(self, value: Any, algorithm: str) -> Any:
        """Convert a value (maybe text from the command line) to the default's type and check it."""
        kind = type(self.default)
        try:
            if isinstance(value, str) and kind is bool:
                if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
                    raise ValueError(value)
                value = value.lower() in ("1", "true", "yes")
            elif self.default is not None and not isinstance(value, kind):
                if kind is int and isinstance(value, float) and not value.is_integer():
                    raise ValueError(value)
                value = kind(value)
        except (TypeError, ValueError):
            raise BadOption(f"{algorithm}: option {self.name}={value!r}; accepted: {accepted_kind(kind)}") from None
        if self.limit and not self.limit[0](value):
            raise BadOption(f"{algorithm}: option {self.name}={value!r}; accepted: {self.limit[1]}")
        return value


def options_of(factory: Callable[..., Any], limits: dict[str, Limit], name: str) -> dict[str, Option]:
    """A factory's options: its keyword-only parameters with defaults, each with its limit if given."""
    params = list(inspect.signature(factory).parameters.values())
    if len(params) < 3 or any(p.kind is p.VAR_KEYWORD for p in params):
        raise PluginError(
            f"{name}: a factory takes (comm, sendbuf, recvbuf, *, option=default, ...); "
            "declare each option as a keyword-only parameter with a default"
        )
    options = {p.name: Option(p.name, p.default, limits.get(p.name))
               for p in params[3:] if p.default is not p.empty}
    stray = set(limits) - set(options)
    if stray:
        raise PluginError(f"{name}: limits for unknown options {', '.join(sorted(stray))}")
    return options


# executor=c|python: every algorithm whose schedule is exact data has it (a2a.execute.executor)
EXECUTOR = "executor"
EXECUTOR_OPTION = Option(EXECUTOR, "c", (lambda s: s in ("c", "python"),
                                         "c (its schedule as data, run by the C executor) or python (its own code)"))


def schedule_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options a factory and a cost formula take: all but the executor, which says what runs the schedule."""
    return {k: v for k, v in options.items() if k != EXECUTOR}


def defaults_text(options: dict[str, Option]) -> str:
    """'radix=2, window=8', or 'none'."""
    return ", ".join(f"{k}={o.default}" for k, o in options.items()) or "none"
