"""Entry point: `python -m bench` (same as `python -m bench run`)."""
import sys

from a2a.mpi import launcher_rank

try:
    from .cli import entry

    entry()
except ModuleNotFoundError as missing:  # a Python without the testbed's packages: most often, outside its venv
    if (missing.name or "").split(".")[0] in ("a2a", "bench"):
        raise
    if launcher_rank() == 0:
        print(f"python -m bench: this Python ({sys.executable}) has no {missing.name}, which the testbed needs; run "
              "it in the venv `make install` made: `. .venv/bin/activate` first, or .venv/bin/python -m bench ...",
              file=sys.stderr)
    sys.exit(2)
