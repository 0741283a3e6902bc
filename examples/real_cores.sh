#!/usr/bin/env bash
# What needs a core per rank, measured in one go on a quiet machine (docs/findings/deploy-verified.md,
# progress-inside-mpi.md, executor.md, simulation-validation.md): bench tune --deploy and IMB-MPI1 under its file;
# overlap with MPICH's progress thread; an idle test(); bruck against MPICH's brucks; the 16-core grid again.
# From the repository root after `make install`, with IMB-MPI1 built by the venv's mpicc:
#   NP=16 OUT=results/real-cores examples/real_cores.sh IMB-MPI1
# The log goes to OUT/log.txt and every record into OUT/records. Each step has a time limit (T_* seconds).
set -u
cd "$(dirname "$0")/.."
IMB=$(realpath "${1:?the path of IMB-MPI1}")
OUT=${OUT:-results/real-cores}; NP=${NP:-16}; HALF=$((NP / 2))
COUNTS=$(printf '%s\n' 2 4 8 "$NP" | awk -v n="$NP" '$1 <= n' | sort -un | paste -sd,)  # the grid's process counts
REC=$OUT/records; mkdir -p "$REC"
exec > >(tee "$OUT/log.txt") 2>&1
export VENV=${VENV:-.venv}
export PATH=$PWD/$VENV/bin:$PATH
export PYTHONUNBUFFERED=1
start=$(date +%s)
stamp() { echo; echo "== [$(( $(date +%s) - start )) s] $*"; }
stamp "machine"; nproc; lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"; git log --oneline -1

stamp "58: bench tune --deploy --nprocs $NP (0 B and every power of two to 1 MiB)"
timeout ${T_TUNE:-220} python -m bench tune --deploy --nprocs "$NP" --launches 2 --iterations 10 --rounds 4 --output "$REC/tune" \
  | grep -v '^sweep-\|^refine-[0-9]*: \|^verify-[0-9]*: \|^decide'
stamp "58: IMB-MPI1 Alltoall without and with the file, 3 alternating launches a side"
f="$REC/tune/deploy.a2a"; [ -f "$f" ] || f="$REC/tune/not-applied.a2a"
[ -f "$f" ] && timeout ${T_IMB:-80} bash examples/deploy_imb_check.sh "$f" "$NP" "$IMB" 3 0:20

stamp "59: overlap on $HALF ranks with MPICH's progress thread, and polled; the executor as before (test)"
for mode in thread poll; do
  timeout ${T_OV:-30} mpiexec -n "$HALF" python -m bench run --timing overlap --sizes 64K,1M --tests 0,10 \
    --algorithms native:form=nonblocking,pairwise,bruck --progress "$mode" --iterations 100 --quiet --format csv \
    --output "$REC/ov-$mode" > /dev/null
  python -m bench show "$REC/ov-$mode" 2>&1 | cut -c1-220
done
timeout ${T_OV:-30} mpiexec -n "$HALF" env A2A_EXECUTOR_PROGRESS=test python -m bench run --timing overlap --sizes 64K,1M \
  --tests 0,10 --algorithms native:form=nonblocking,pairwise --progress thread --iterations 100 --quiet --format csv \
  --output "$REC/ov-thread-test" > /dev/null
python -m bench show "$REC/ov-thread-test" 2>&1 | cut -c1-220
stamp "59: an idle test(), from Python and C, at 4 and $NP ranks"
timeout ${T_COST:-30} bash examples/test_cost.sh $(printf '%s\n' 4 "$NP" | sort -un)
stamp "59: bruck c against MPICH's brucks, and pairwise against its pairwise, at 4 and $NP ranks"
for p in $(printf '%s\n' 4 "$NP" | sort -un); do
  MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=brucks timeout ${T_RACE:-20} mpiexec -n "$p" python examples/executor_race.py native bruck \
    --reps 3 --budget 0.02
done
MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=pairwise timeout ${T_RACE:-20} mpiexec -n "$NP" python examples/executor_race.py native \
  pairwise --reps 3 --budget 0.02
stamp "60: the grid again with this commit's executor (every algorithm, 2 to $NP ranks)"
timeout ${T_GRID:-120} mpiexec -n "$NP" python -m bench run --nprocs "$COUNTS" --sizes 8,1K,64K,1M --iterations 15 \
  --quiet --format csv --output "$REC/grid" > /dev/null
stamp "done"; du -sh "$REC"
