#!/usr/bin/env bash
# What liba2a costs a C program: an IMB-style MPI_Alltoall loop (examples/programs/alltoall_loop.c) run
#   mpich    MPICH's own twin of ALGORITHM (MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=TWIN)
#   served   liba2a with a deploy file that chooses ALGORITHM at every size (the testbed's schedule in the executor)
#   library  the library's default, no liba2a
#   counted  liba2a with no deploy file (it counts the calls and passes them on)
# side by side, ROUNDS times, at each process count. Usage: examples/deploy_overhead.sh [ROUNDS] [NPROCS...]
# with ALGORITHM=pairwise TWIN=pairwise by default (bruck's twin: brucks). From the repository root after
# `make install`; MPICH only: the first variant names an MPICH variable.
set -euo pipefail
rounds=${1:-3}; shift || true
nprocs=${*:-2 4}
bin=${VENV:-.venv}/bin
algorithm=${ALGORITHM:-pairwise}
twin=${TWIN:-pairwise}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/mpicc" -O2 -Wall -Wextra -o "$work/loop" examples/programs/alltoall_loop.c
preload=$("$bin/python" -m bench deploy --library)
"$bin/python" - "$work/decision.json" "$algorithm" $nprocs <<'PY'
import json, sys
tables = [{"nprocs": int(p), "collective": "alltoall", "ranges": [{"bytes_min": 0, "bytes_max": None,
          "algorithm": sys.argv[2], "options": "", "cells": []}]} for p in sys.argv[3:]]
json.dump({"schema": "a2a-decision/1", "metric": "mean", "tables": tables, "sources": []}, open(sys.argv[1], "w"))
PY
"$bin/python" -m bench deploy "$work/decision.json" -o "$work/chosen.a2a" >/dev/null
sizes="8 1024 65536 1048576"
for round in $(seq "$rounds"); do
  for p in $nprocs; do
    for variant in mpich served library counted; do
      case $variant in
        mpich) run=(env MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM="$twin") ;;
        served) run=(env LD_PRELOAD="$preload" A2A_DEPLOY="$work/chosen.a2a") ;;
        library) run=(env) ;;
        counted) run=(env LD_PRELOAD="$preload") ;;
      esac
      "$bin/mpiexec" -n "$p" "${run[@]}" "$work/loop" 100 11 $sizes | grep -v '^#' |
        sed "s/^/$round $p $variant /"
    done
  done
done >"$work/runs.txt"
"$bin/python" - "$work/runs.txt" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, p, variant, size, median, *_ = line.split()
    runs[int(p), int(size), variant].append(float(median))
print("nprocs   bytes  mpich_us  served_us  served/mpich  library_us  counted_us  counted-library_us")
for p, size in sorted({(p, s) for p, s, _ in runs}):
    m = {v: statistics.median(runs[p, size, v]) for v in ("mpich", "served", "library", "counted")}
    print(f"{p:6} {size:7} {m['mpich']:9.2f} {m['served']:10.2f} {m['served'] / m['mpich']:13.2f} "
          f"{m['library']:11.2f} {m['counted']:11.2f} {m['counted'] - m['library']:19.3f}")
PY
