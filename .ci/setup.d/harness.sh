#!/usr/bin/env bash
# The C reference of the harness test is compiled by the MPI wheel's mpicc, which calls `cc`.
set -euo pipefail
if ! command -v cc >/dev/null; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev
fi
