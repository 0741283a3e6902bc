"""`python -m bench` and the a2a-bench script: the command group with every command, errors caught once."""
from __future__ import annotations

import sys
import time

import click

from a2a.errors import A2AError
from a2a.mpi import launcher_rank

from .group import main

# Launchers such as Open MPI's prterun end the whole job at the first non-zero exit; the
# quiet ranks wait this long so that rank 0's message is out before that happens.
QUIET_EXIT_DELAY = 1.0


def entry(argv: list[str] | None = None) -> None:
    """Run the CLI; errors in the options are printed once (by rank 0) and exit 2 on every rank."""
    quiet = launcher_rank() != 0
    try:
        main.main(args=argv, prog_name="python -m bench", standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as problem:
        if not quiet:
            problem.show()
        _refuse(2 if problem.exit_code in (1, 2) else problem.exit_code, quiet)
    except A2AError as problem:
        if not quiet:
            click.echo(f"error: {problem}", err=True)
        _refuse(2, quiet)
    except click.Abort:
        sys.exit(130)


def _refuse(code: int, quiet: bool) -> None:
    if quiet:
        time.sleep(QUIET_EXIT_DELAY)
    sys.exit(code)
