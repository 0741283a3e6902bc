#!/usr/bin/env bash
# A chain of runs that learn as one: RUNS runs of a program under liba2a with one A2A_LEARN_OUT, each run starting
# from what the run before it learned. A learned file is a deploy file (the learn lines it was made from, and a
# `learned` line per size class), so run 1 reads LEARN_FILE and every later run reads LEARNED_FILE, which each run
# writes again at MPI_Finalize (docs/learn.md, "Chains of runs"). Prints, per run, the program's own output and the
# lines of liba2a's report (A2A_DEPLOY_REPORT=1) that say what each size class learned. Usage, after `make install`
# (VENV: another venv than the repository's .venv):
#   examples/learn_chain.sh LEARN_FILE LEARNED_FILE RUNS NPROCS PROGRAM [ARGUMENT...]
# LEARN_FILE from `python -m bench deploy --learn`; an existing LEARNED_FILE is continued from (remove it to start
# afresh). Variables set before the command reach the ranks, e.g. MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=brucks.
set -euo pipefail
usage="usage: examples/learn_chain.sh LEARN_FILE LEARNED_FILE RUNS NPROCS PROGRAM [ARGUMENT...]"
[ $# -ge 5 ] && [ -f "$1" ] && [[ $3 =~ ^[1-9][0-9]*$ ]] && [[ $4 =~ ^[1-9][0-9]*$ ]] && [ -x "$(command -v "$5")" ] \
  || { echo "$usage (a learn file, the file to learn into, a number of runs, a process count, a program)" >&2; exit 2; }
learn=$(realpath "$1"); learned=$(realpath "$2"); runs=$3; np=$4; shift 4
bin=${VENV:-$(dirname "$0")/../.venv}/bin
lib=$("$bin/python" -m bench deploy --library)
read -r -a flags <<<"$("$bin/python" -c 'from a2a.mpi import launcher_flags, mpi_tool; print(*launcher_flags(mpi_tool("mpiexec")))')"
report=$(mktemp)
trap 'rm -f "$report"' EXIT
[ -f "$learned" ] && echo "continuing from $learned (remove it to start afresh)"
for run in $(seq "$runs"); do
  from=$learn
  [ -f "$learned" ] && from=$learned
  echo "run $run (A2A_DEPLOY=$(basename "$from")):"
  if ! "$bin/mpiexec" "${flags[@]}" -n "$np" env LD_PRELOAD="$lib" A2A_DEPLOY="$from" A2A_LEARN_OUT="$learned" \
       A2A_DEPLOY_REPORT=1 "$@" 2>"$report" | sed 's/^/  /'; then
    echo "run $run failed:" >&2; tail -20 "$report" >&2; exit 1
  fi
  # the report's learn lines, each candidate's evidence under them, and any line liba2a refused something in
  awk '/^  learn / {on = 1} /^  [^ ]/ && !/^  learn / {on = 0} on || /^a2a: /' "$report"
done
