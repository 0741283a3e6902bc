"""The click command group and what every command shares; a command's module is imported when it is named."""
from __future__ import annotations

from importlib import import_module
from typing import Any

import click

from a2a.mpi import launcher_rank

# Each command's module (bench.MODULE), imported only when the command is named or listed: a rank of
# `mpirun -n 128 python -m bench run` loads run's code, not the simulator's, the plots' or the cluster's.
COMMANDS = {
    "run": "run", "list": "show", "show": "show", "decide": "decide", "export": "decide", "deploy": "deploy",
    "compare": "decide", "validate": "decide", "tune": "tune", "plot": "plot", "simulate": "simulate",
    "model": "model", "overhead": "overhead", "harness": "harness", "topology-study": "topology",
    "cluster": "cluster", "seed-repro": "cluster", "slurm": "slurm_cmd",
}


class DefaultToRun(click.Group):
    """A group that runs `run` when no subcommand is named (`python -m bench --sizes 8`), and imports a command's
    module when the command is first needed."""

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            import_module(f"bench.{COMMANDS[cmd_name]}")  # its decorators add it to this group
        return super().get_command(ctx, cmd_name)  # type: ignore[arg-type]

    def list_commands(self, ctx: click.Context | None) -> list[str]:
        return sorted(name for name in COMMANDS if self.get_command(ctx, name))

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
