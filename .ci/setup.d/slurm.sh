#!/usr/bin/env bash
# Slurm and munge for tests/test_slurm.py. The tests start a private munged, slurmctld and
# slurmd of their own (temporary directory, free ports) and stop them, so nothing is started here.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends slurm-wlm munge
