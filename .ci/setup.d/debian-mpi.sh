#!/usr/bin/env bash
# Debian's own MPICH and Open MPI (with mpif90), as a cluster's MPI: each gets a venv of its own whose mpi4py is built
# from source against it, as docs/cluster-usage.md says, for `make test-debian` (mk/debian.mk). Idempotent; the venvs
# go to $A2A_DEBIAN_VENVS (default ~/.cache/a2a), as debian-mpich and debian-openmpi.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="${A2A_DEBIAN_VENVS:-$HOME/.cache/a2a}"
packages=(mpich libmpich-dev openmpi-bin libopenmpi-dev gfortran)
if ! dpkg -s "${packages[@]}" > /dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${packages[@]}"
fi
for library in mpich openmpi; do
  venv="$root/debian-$library"
  if "$venv/bin/python" -c "import mpi4py.MPI, numpy, pytest, a2a" 2> /dev/null && [ -x "$venv/bin/mpicc" ]; then
    continue
  fi
  mkdir -p "$root"
  python3 -m venv "$venv"
  # The library's tools beside the venv's python, where the testbed looks for them first: with both libraries
  # installed, Debian's plain mpicc and mpirun are whichever one update-alternatives chose. The version tool tells
  # the testbed which library a launcher is (Open MPI's needs --oversubscribe and, as root, --allow-run-as-root).
  for tool in mpicc mpif90 mpiexec mpirun; do
    printf '#!/bin/sh\nexec /usr/bin/%s.%s "$@"\n' "$tool" "$library" > "$venv/bin/$tool"
    chmod +x "$venv/bin/$tool"
  done
  if [ "$library" = mpich ]; then ln -sf /usr/bin/mpichversion "$venv/bin/"; else ln -sf /usr/bin/ompi_info "$venv/bin/"; fi
  # docs/cluster-usage.md, "Using your cluster's MPI"; unoptimised (CFLAGS, after Python's own -O3), which takes a
  # tenth of the time to compile mpi4py's one large C file and changes nothing the tests check
  env MPICC="$venv/bin/mpicc" CFLAGS="-O0 -g0" "$venv/bin/pip" install --quiet --no-binary=mpi4py --no-cache-dir mpi4py
  "$venv/bin/pip" install --quiet -e '.[test]'
  "$venv/bin/python" -c "from mpi4py import MPI; print('$venv:', MPI.Get_library_version().splitlines()[0][:60])"
done
