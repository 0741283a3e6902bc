#!/usr/bin/env bash
# Build SimGrid's SMPI (smpirun, smpireplaymain) from its source release on PyPI into PREFIX.
# Why not Debian 12's SimGrid 3.32 (which works: A2A_SMPIRUN=/usr/bin/smpirun picks it): it keeps
# every detached (eager) send of the whole job in one list and removes each finished send by a scan
# of it, so a schedule with all p(p-1) messages in flight (linear) replays in O(p^4); 3.34 made that
# list a set. About 12 minutes on 2 cores.
# Usage: bash mk/simgrid.sh [PREFIX]   (default /usr/local; smpirun lands in PREFIX/bin: put PREFIX/bin
# first on PATH, or name it in A2A_SMPIRUN=PREFIX/bin/smpirun)
set -euo pipefail
VERSION=4.1
SHA256=23ac24cb5b2467f1f051c992ec921b4a9f8f5ac2df16c489bd01bf1c44e6e817
PREFIX=${1:-/usr/local}
PYTHON=${PYTHON:-python3}

if "$PREFIX/bin/smpirun" -version 2>/dev/null | grep -q "SimGrid version $VERSION\b"; then
  echo "SimGrid $VERSION is already in $PREFIX"
  exit 0
fi
for tool in cmake make c++; do
  command -v "$tool" >/dev/null || { echo "building SimGrid needs $tool (Debian: apt-get install cmake g++)" >&2; exit 1; }
done
if ! echo '#include <boost/intrusive_ptr.hpp>' | c++ -x c++ -fsyntax-only - 2>/dev/null; then
  echo "building SimGrid needs Boost's headers (Debian: apt-get install libboost-dev)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m pip download --quiet --no-deps --no-binary :all: "simgrid==$VERSION" -d "$work"
echo "$SHA256  $work/simgrid-$VERSION.tar.gz" | sha256sum --check --quiet
tar -xzf "$work/simgrid-$VERSION.tar.gz" -C "$work"
cd "$work"  # its configure checks leave programs in the working directory
# only SMPI: no bindings, model checker or Fortran; SimGrid's -O3 without its -g3 debug info
cmake -S "$work/simgrid-$VERSION" -B "$work/build" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-g0 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-g0 -DNDEBUG" \
  -Denable_smpi=ON -Denable_python=OFF -Denable_java=OFF -Denable_model-checking=OFF -Denable_sthread=OFF \
  -Denable_fortran=OFF -Denable_lto=OFF -Denable_documentation=OFF >"$work/cmake.log" 2>&1 \
  || { tail -30 "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" --parallel "$(nproc)" --target simgrid smpimain smpireplaymain graphicator \
  >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
cmake --install "$work/build" >/dev/null
"$PREFIX/bin/smpirun" -version | head -1
