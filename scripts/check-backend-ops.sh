#!/usr/bin/env bash
# Builds ggml's conformance suite, tests/test-backend-ops.cpp of a llama.cpp (or ggml) tree,
# unchanged against kvgraph's headers (ggml/include) and libkvgraph-ggml, runs it on the CPU
# backend (mode "test": the CPU compared with itself in reference mode, set through
# ggml_backend_cpu_set_use_ref: scalar kernels, barrier executor), and prints per op how
# many cases passed, were not supported, and failed, then the totals.
#
#   scripts/check-backend-ops.sh SRC [test-backend-ops options, e.g. -o MUL_MAT]
#
# SRC: a llama.cpp or ggml source tree (its tests/test-backend-ops.cpp). Nothing of it is
# kept in this tree. Logs go to $OUT (default: a temporary folder); BUILD picks the
# kvgraph build folder (default: build).
set -uo pipefail
cd "$(dirname "$0")/.."
src="${1:?usage: $0 LLAMA_CPP_OR_GGML_SRC [options]}"; shift
file="$src/tests/test-backend-ops.cpp"
[ -f "$file" ] || { echo "no $file" >&2; exit 1; }
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
build="${BUILD:-build}"
cmake --build "$build" -j "$(nproc)" --target ggml > "$out/build.log" 2>&1 || { echo "kvgraph build failed ($out/build.log)" >&2; exit 1; }
lib=$(find "$build" -name 'libkvgraph-ggml.a' -o -name 'libkvgraph-ggml.so' | head -1)
[ -n "$lib" ] || { echo "no libkvgraph-ggml under $build" >&2; exit 1; }
if ! c++ -O2 -std=c++17 -I"$PWD/ggml/include" -c "$file" -o "$out/test-backend-ops.o" > "$out/compile.log" 2>&1 ||
   ! c++ "$out/test-backend-ops.o" "$lib" -lpthread -lm -o "$out/test-backend-ops" >> "$out/compile.log" 2>&1; then
    echo "BUILD test-backend-ops ($(grep -m1 -E 'error|undefined' "$out/compile.log" | cut -c1-150))"
    exit 1
fi
(cd "$out" && ./test-backend-ops test -b CPU "$@" > run.log 2>&1)
rc=$?
# case lines: "  OP(params): OK | not supported [...] | FAIL" (FAIL may follow error text)
sed 's/\x1b\[[0-9;]*m//g' "$out/run.log" | awk '
    /^  [A-Z_0-9]+(\(|:)/ {
        op = $1; sub(/\(.*/, "", op); sub(/:$/, "", op)
        if ($0 ~ /: OK$/) ok[op]++
        else if ($0 ~ /not supported/) ns[op]++
        else if ($0 ~ /FAIL/) bad[op]++
        else next
        seen[op] = 1
    }
    END { for (o in seen) printf "%-28s %7d %14d %7d\n", o, ok[o], ns[o], bad[o] }' | sort > "$out/per-op.txt"
printf "%-28s %7s %14s %7s\n" op passed "not supported" failed
cat "$out/per-op.txt"
awk '{ p += $2; n += $3; f += $4 } END { printf "%-28s %7d %14d %7d\n", "total", p, n, f }' "$out/per-op.txt"
echo "test-backend-ops exit $rc; log $out/run.log"
exit $rc
