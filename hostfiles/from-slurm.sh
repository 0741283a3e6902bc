#!/bin/bash
# Print a hostfile for this Slurm allocation:   bash hostfiles/from-slurm.sh openmpi|mpich > hosts
# Hosts come from $SLURM_JOB_NODELIST (expanded by `scontrol show hostnames`) and the slots
# per host from $SLURM_TASKS_PER_NODE ("4(x2),2" means 4, 4, 2), both set inside a job.
set -euo pipefail

flavour=${1:-}
case $flavour in
  openmpi) line='%s slots=%s\n' ;;  # mpirun --hostfile hosts
  mpich) line='%s:%s\n' ;;          # mpiexec -f hosts  (Intel MPI: -machinefile hosts)
  *) echo "usage: $0 openmpi|mpich (got '$flavour'); accepted: openmpi, mpich" >&2; exit 2 ;;
esac
: "${SLURM_JOB_NODELIST:?not in a Slurm job (no SLURM_JOB_NODELIST)}"
: "${SLURM_TASKS_PER_NODE:?not in a Slurm job with tasks (no SLURM_TASKS_PER_NODE)}"
command -v scontrol > /dev/null || { echo "$0: scontrol is not on PATH; it expands SLURM_JOB_NODELIST" \
  "(run this inside the job, where Slurm's commands are)" >&2; exit 2; }
hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
[ -n "$hosts" ] || { echo "$0: scontrol named no host in SLURM_JOB_NODELIST='$SLURM_JOB_NODELIST'" >&2; exit 2; }

slots=()
IFS=, read -ra groups <<< "$SLURM_TASKS_PER_NODE"
for group in "${groups[@]}"; do
  if [[ $group =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
    for ((i = 0; i < BASH_REMATCH[2]; i++)); do slots+=("${BASH_REMATCH[1]}"); done
  else
    slots+=("$group")
  fi
done

i=0
while read -r host; do
  printf "$line" "$host" "${slots[i]:-${slots[-1]}}"
  i=$((i + 1))
done <<< "$hosts"
