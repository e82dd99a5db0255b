#!/usr/bin/env bash
# The install test (tests/install/run.sh) on a shared-library build: libraries, the CMake
# package and pkg-config file of a BUILD_SHARED_LIBS=ON install, and installed programs
# that find their libraries through their RPATH. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD:-build-shared}"
shared="${KVG_SHARED_DIR:-$PWD/../shared}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DKVG_BUILD_TESTS=OFF > /dev/null
cmake --build "$build" -j "$(nproc)" > /dev/null
find "$build" -name 'libkvgraph.so*' | grep -q . || { echo "no libkvgraph.so in $build" >&2; exit 1; }
bash tests/install/run.sh "$build" "$PWD" "$shared/models/stories260K.bin" "$shared/fixtures/stories260K.greedy.txt"
