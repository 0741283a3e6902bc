#!/usr/bin/env bash
# The deploy loop on the project's own program (a2a/deploy/c/transpose_sort.c, a 2-D FFT transpose and a sample
# sort): run it, record what it exchanges, race every algorithm on exactly those calls, deploy the winners, and run
# it again with them inside. Usage, from the repository root after `make install`:
#   examples/deploy_loop.sh [DIR]        (default results/deploy-loop; NP ranks, default 4; ITERATIONS, default 10;
#                                         ALGORITHMS to race, default every one)
set -euo pipefail
dir=${1:-results/deploy-loop}
np=${NP:-4}
bin=${VENV:-.venv}/bin
program=$("$bin/python" -c "from a2a.deploy.transpose_sort import transpose_sort; print(transpose_sort())")
lib=$("$bin/python" -m bench deploy --library)
read -r -a flags <<<"$("$bin/python" -c 'from a2a.mpi import launcher_flags, mpi_tool; print(*launcher_flags(mpi_tool("mpiexec")))')"
launch=("$bin/mpiexec" "${flags[@]}" -n "$np")
args=(--iterations "${ITERATIONS:-10}" --skew 1)
rm -rf "$dir" && mkdir -p "$dir"
say() { printf '\n== %s\n' "$*"; }

say "1. the program as it is: the MPI library's own all-to-all"
"${launch[@]}" "$program" "${args[@]}" | tee "$dir/before.txt"

say "2. record what it exchanges: A2A_RECORD=$dir/record"
"${launch[@]}" env LD_PRELOAD="$lib" A2A_RECORD="$dir/record" "$program" "${args[@]}" >/dev/null
cut -c1-150 "$dir"/record/*.jsonl

say "3. race every algorithm on exactly those calls"
for collective in alltoall alltoallv; do
  "${launch[@]}" "$bin/python" -m bench run --workload "recorded:$dir/record" --collective "$collective" \
    ${ALGORITHMS:+--algorithms "$ALGORITHMS"} --iterations "${RACE_ITERATIONS:-30}" --output "$dir/race-$collective" >"$dir/race-$collective.txt"
  sed -n '/^Decision/,/^next/p' "$dir/race-$collective.txt" | grep -v '^next'
done

say "4. deploy the winners"
"$bin/python" -m bench deploy "$dir/race-alltoall" "$dir/race-alltoallv" --nprocs "$np" -o "$dir/deploy.a2a"

say "5. the program again, the winners inside it"
"${launch[@]}" env LD_PRELOAD="$lib" A2A_DEPLOY="$dir/deploy.a2a" A2A_DEPLOY_REPORT=1 "$program" "${args[@]}" \
  2>&1 | tee "$dir/after.txt"

say "time in the all-to-all calls, us per iteration (before -> after)"
"$bin/python" - "$dir" <<'PY'
import sys
from pathlib import Path

from a2a.deploy.transpose_sort import phase_times

before, after = (phase_times(Path(sys.argv[1], name).read_text()) for name in ("before.txt", "after.txt"))
for phase, (_, calls) in before.items():
    print(f"{phase}: {calls:.1f} -> {after[phase][1]:.1f} ({calls / after[phase][1]:.2f}x)")
PY
