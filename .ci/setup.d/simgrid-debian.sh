#!/usr/bin/env bash
# Debian 12's SimGrid 3.32 (libsimgrid-dev: /usr/bin/smpirun, its replayer, library and headers) beside the
# 4.1 that simgrid.sh builds into /usr/local, which stays first on PATH: tests/test_simgrid_versions.py
# simulates on 3.32 with A2A_SMPIRUN=/usr/bin/smpirun. About a minute.
set -euo pipefail
if [ ! -x /usr/bin/smpirun ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends libsimgrid-dev g++
fi
/usr/bin/smpirun -version | head -1
