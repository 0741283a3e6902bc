#!/usr/bin/env bash
# SimGrid's SMPI for `bench simulate` and its tests: SimGrid 4.1 built from source into
# /usr/local (mk/simgrid.sh says why not Debian 12's 3.32), with the tools it builds with.
set -euo pipefail
if ! command -v cmake >/dev/null || [ ! -e /usr/include/boost/version.hpp ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends cmake g++ make libboost-dev
fi
bash mk/simgrid.sh /usr/local
