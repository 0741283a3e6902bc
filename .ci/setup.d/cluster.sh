#!/usr/bin/env bash
# The emulated cluster's tests need ip and tc (iproute2), unshare and setpriv (util-linux).
set -euo pipefail
if ! command -v ip >/dev/null || ! command -v tc >/dev/null || ! command -v unshare >/dev/null \
   || ! command -v setpriv >/dev/null; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iproute2 util-linux
fi
# A cluster left by an interrupted session would make its tests skip: remove it (only our names).
for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^a2a-(sw|n[0-9]+|r[0-9]+)$/ {print $1}'); do
  for pid in $(ip netns pids "$ns"); do kill -9 "$pid" 2>/dev/null || true; done
  ip netns del "$ns"
done
rm -rf /run/a2a-cluster /etc/netns/a2a-sw /etc/netns/a2a-n[0-9]*
