#!/usr/bin/env bash
# SimGrid's SMPI for `bench simulate` and its tests: smpirun and smpireplaymain come with
# libsimgrid-dev on Debian 12 (later releases ship them in the `simgrid` package as well).
set -euo pipefail
if command -v smpirun >/dev/null && ls /usr/lib/*/simgrid/smpireplaymain >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends libsimgrid-dev python3-simgrid
if apt-cache policy simgrid | grep -q 'Candidate: [0-9]'; then
  apt-get install -y -q --no-install-recommends simgrid
fi
