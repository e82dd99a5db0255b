#!/usr/bin/env bash
# Builds ggml's own CPU programs unchanged against kvgraph's headers (ggml/include) and
# libkvgraph-ggml, runs each, and prints one line per program: PASS, FAIL (ran, exit != 0)
# or BUILD (did not compile or link), then the count.
#
#   scripts/check-ggml-programs.sh GGML_SRC [PROGRAM...]
#
# GGML_SRC: a ggml source tree (github.com/ggml-org/ggml: its tests/ and examples/simple/).
# PROGRAM: names to run (default: every tests/test-*.c|cpp and simple-ctx, simple-backend).
# Nothing of ggml is kept in this tree. Logs go to $OUT (default: a temporary folder).
# test-backend-ops runs as "$TBO_ARGS" (default: mode test on the CPU for a few common ops;
# without -b it would skip the CPU, the only device here); scripts/check-backend-ops.sh
# runs all of it and counts per op.
set -uo pipefail
cd "$(dirname "$0")/.."
src="${1:?usage: $0 GGML_SRC [PROGRAM...]}"; shift
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
build="${BUILD:-build}"
cmake --build "$build" -j "$(nproc)" --target ggml > "$out/build.log" 2>&1 || { echo "kvgraph build failed" >&2; exit 1; }
inc="$PWD/ggml/include"
lib=$(find "$build" -name 'libkvgraph-ggml.a' -o -name 'libkvgraph-ggml.so' | head -1)
[ -n "$lib" ] || { echo "no libkvgraph-ggml under $build" >&2; exit 1; }

source_of() {
    case "$1" in
        simple-ctx|simple-backend) echo "$src/examples/simple/$1.cpp" ;;
        *) ls "$src/tests/$1.c" "$src/tests/$1.cpp" 2> /dev/null | head -1 ;;
    esac
}
if [ $# -eq 0 ]; then
    set -- $(cd "$src/tests" && ls test-*.c test-*.cpp | sed 's/\.cpp$//; s/\.c$//' | sort) simple-ctx simple-backend
fi

pass=0; total=0
for prog in "$@"; do
    total=$((total + 1))
    file=$(source_of "$prog")
    if [ -z "$file" ]; then echo "MISSING $prog"; continue; fi
    case "$file" in
        *.c) cc -O2 -std=c11 -I"$inc" -c "$file" -o "$out/$prog.o" > "$out/$prog.build.log" 2>&1 ;;
        *) c++ -O2 -std=c++17 -I"$inc" -c "$file" -o "$out/$prog.o" > "$out/$prog.build.log" 2>&1 ;;
    esac
    if [ $? -ne 0 ] || ! c++ "$out/$prog.o" "$lib" -lpthread -lm -o "$out/$prog" >> "$out/$prog.build.log" 2>&1; then
        echo "BUILD   $prog ($(grep -m1 -E 'error|undefined' "$out/$prog.build.log" | cut -c1-150))"
        continue
    fi
    args=()
    [ "$prog" = test-backend-ops ] && read -r -a args <<< "${TBO_ARGS:-test -b CPU -o ADD,MUL,SCALE,SOFT_MAX,ROPE,RMS_NORM,GET_ROWS,CPY}"
    if (cd "$out" && timeout 300 "./$prog" "${args[@]}" > "$out/$prog.run.log" 2>&1); then
        echo "PASS    $prog"; pass=$((pass + 1))
    else
        echo "FAIL    $prog (exit $?, log $out/$prog.run.log)"
    fi
done
echo "$pass of $total ggml programs build and pass"
