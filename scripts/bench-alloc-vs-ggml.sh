#!/usr/bin/env bash
# Plans the same graphs with kvgraph's planner and with ggml's, in one run:
# examples/bench-alloc/scaling.cpp built against kvgraph (build/bin/kvg-bench-alloc-scaling)
# and against a ggml source tree (its ggml-base and ggml-cpu libraries).
#
#   scripts/bench-alloc-vs-ggml.sh LLAMA_CPP_SRC [GGML_BUILD_DIR]
#
# LLAMA_CPP_SRC: a llama.cpp checkout (e.g. from the npm package node-llama-cpp's
# llama/gitRelease.bundle) or a ggml checkout; GGML_BUILD_DIR: where its ggml libraries were built, default
# LLAMA_CPP_SRC/../build-ggml (cmake -S LLAMA_CPP_SRC -B ... -DBUILD_SHARED_LIBS=OFF, then
# cmake --build ... --target ggml-base ggml-cpu). Nothing of ggml is kept in this tree.
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:?usage: $0 LLAMA_CPP_SRC [GGML_BUILD_DIR]}"
bld="${2:-$src/../build-ggml}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
libs=$(find "$bld" -name 'libggml-cpu.a' -o -name 'libggml-base.a' | sort -r | tr '\n' ' ')
[ -n "$libs" ] || { echo "no libggml-base.a / libggml-cpu.a under $bld" >&2; exit 1; }
inc="$src/ggml/include"
[ -d "$inc" ] || inc="$src/include" # a ggml tree rather than llama.cpp's
g++ -O2 -std=c++17 -DBENCH_WITH_GGML -I"$inc" examples/bench-alloc/scaling.cpp $libs -fopenmp -lpthread -lm -o "$out/peer"
cmake --build build --target kvg-bench-alloc-scaling > /dev/null
build/bin/kvg-bench-alloc-scaling
"$out/peer" --no-header
