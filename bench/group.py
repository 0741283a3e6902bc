"""The click command group and what every command shares; it imports no command (bench.cli does)."""
from __future__ import annotations

from typing import Any

import click

from a2a.mpi import launcher_rank


class DefaultToRun(click.Group):
    """A group that runs `run` when no subcommand is named (`python -m bench --sizes 8`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0].startswith("-") and args[0] not in ("-h", "--help", "--version")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultToRun, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="a2a-testbed")
def main() -> None:
    """MPI all-to-all testbed: measure algorithms, flag stalls, decide and export the winners.

    With no subcommand, `run` sweeps the default grid.
    """


def echo(*args: Any, **kwargs: Any) -> None:
    """Print from rank 0 only."""
    if launcher_rank() == 0:
        click.echo(*args, **kwargs)
