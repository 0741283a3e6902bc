#!/usr/bin/env bash
# What an idle test costs, from Python and from C (docs/findings/progress-inside-mpi.md). At each process count:
#   python   examples/test_cost.py: Plan.test() of a started pairwise plan (executor=c, however it progresses here),
#            pairwise:executor=python (the progression engine) and native:form=nonblocking (mpi4py's MPI_Test)
#   c        examples/programs/ialltoall_test_cost.c: MPI_Test of an MPI_Ialltoall, the library's own ("library")
#            and one liba2a serves with a deploy file choosing pairwise at every size ("served")
# Usage: examples/test_cost.sh [NPROCS...] (default 2), from the repository root after `make install`.
set -euo pipefail
nprocs=${*:-2}
bin=${VENV:-.venv}/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/mpicc" -O2 -Wall -Wextra -o "$work/cost" examples/programs/ialltoall_test_cost.c
preload=$("$bin/python" -m bench deploy --library)
"$bin/python" - "$work/decision.json" $nprocs <<'PY'
import json, sys
tables = [{"nprocs": int(p), "collective": "alltoall", "ranges": [{"bytes_min": 0, "bytes_max": None,
          "algorithm": "pairwise", "options": "", "cells": []}]} for p in sys.argv[2:]]
json.dump({"schema": "a2a-decision/1", "metric": "mean", "tables": tables, "sources": []}, open(sys.argv[1], "w"))
PY
"$bin/python" -m bench deploy "$work/decision.json" -o "$work/pairwise.a2a" >/dev/null
for p in $nprocs; do
  echo "== $p ranks, python"
  "$bin/mpiexec" -n "$p" "$bin/python" examples/test_cost.py pairwise pairwise:executor=python \
    native:form=nonblocking --sizes 8,65536
  echo "== $p ranks, c: the library's own MPI_Ialltoall"
  "$bin/mpiexec" -n "$p" "$work/cost" 2000 15 8 65536
  echo "== $p ranks, c: MPI_Ialltoall served by liba2a (pairwise)"
  "$bin/mpiexec" -n "$p" env LD_PRELOAD="$preload" A2A_DEPLOY="$work/pairwise.a2a" "$work/cost" 2000 15 8 65536
done
