#!/usr/bin/env bash
# A deploy file checked with IMB-MPI1's own Alltoall, as a user would: ROUNDS alternating launches without and with
# liba2a and the file, then per size the median over launches of IMB's t_avg and their ratio. Usage, from the
# repository root after `make install` (IMB-MPI1 built with the venv's mpicc, e.g. `make IMB-MPI1 CC=.venv/bin/mpicc
# CXX=.venv/bin/mpicxx` in IMB's source):
#   examples/deploy_imb_check.sh DEPLOY_FILE NPROCS IMB-MPI1 [ROUNDS] [MSGLOG]  (ROUNDS 3, MSGLOG 0:20; ITER=1000 calls a size)
set -euo pipefail
usage="usage: examples/deploy_imb_check.sh DEPLOY_FILE NPROCS IMB-MPI1 [ROUNDS] [MSGLOG]"
[ $# -ge 3 ] && [ -f "$1" ] && [ -x "$3" ] || { echo "$usage (a deploy file, a process count, IMB-MPI1's path)" >&2; exit 2; }
file=$(realpath "$1"); np=$2; imb=$3; rounds=${4:-3}; msglog=${5:-0:20}
bin=${VENV:-.venv}/bin
lib=$("$bin/python" -m bench deploy --library)
read -r -a flags <<<"$("$bin/python" -c 'from a2a.mpi import launcher_flags, mpi_tool; print(*launcher_flags(mpi_tool("mpiexec")))')"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for round in $(seq "$rounds"); do
  for side in without with; do
    run=(env)
    [ "$side" = with ] && run=(env LD_PRELOAD="$lib" A2A_DEPLOY="$file")
    "$bin/mpiexec" "${flags[@]}" -n "$np" "${run[@]}" "$imb" Alltoall -npmin "$np" -msglog "$msglog" -iter "${ITER:-1000}" \
      -time 2 -mem 2 > "$work/$side-$round.txt"
  done
done
"$bin/python" - "$work" "$rounds" "$np" <<'PY'
import re, statistics, sys
from pathlib import Path

work, rounds, np_ = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def t_avg(path):
    text = path.read_text().split(f"# ( {int(np_) - 1} additional process")[0] if False else path.read_text()
    rows = re.findall(r"^\s+(\d+)\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s*$", text, re.M)
    return {int(b): float(t) for b, t in rows}
sides = {s: [t_avg(work / f"{s}-{r}.txt") for r in range(1, rounds + 1)] for s in ("without", "with")}
print(f"IMB-MPI1 Alltoall on {np_} ranks, t_avg in us, median of {rounds} alternating launches a side")
print(f"{'bytes':>8} {'without':>10} {'with':>10} {'with/without':>13} {'difference us':>14}")
for size in sorted(sides["without"][0]):
    a = statistics.median(run[size] for run in sides["without"])
    b = statistics.median(run[size] for run in sides["with"])
    print(f"{size:>8} {a:>10.2f} {b:>10.2f} {b / a if a else float('nan'):>13.2f} {b - a:>14.2f}")
PY
