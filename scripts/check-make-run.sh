#!/usr/bin/env bash
# README's main command on a machine without doctest: a fresh clone of this repository,
# `make run` with doctest made unavailable to CMake. It must configure, build only the
# libraries and kvg-generate (no test binary), and generate text. Prints the time taken.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
git clone -q . "$dir/kvgraph"
start=$(date +%s)
out="$(make -C "$dir/kvgraph" run CMAKE_FLAGS=-DCMAKE_DISABLE_FIND_PACKAGE_doctest=ON 2>&1)"
echo "$out" | tail -4
grep -q "doctest not found: tests are not built" <<< "$out" || { echo "check-make-run: no 'doctest not found' line" >&2; exit 1; }
grep -q "^And God said" <<< "$out" || { echo "check-make-run: no generated text" >&2; exit 1; }
grep -q "generated: *200 tokens" <<< "$out" || { echo "check-make-run: did not generate 200 tokens" >&2; exit 1; }
if ls "$dir/kvgraph/build/tests"/test-* > /dev/null 2>&1; then
    echo "check-make-run: make run built test binaries" >&2
    exit 1
fi
echo "check-make-run: passed in $(( $(date +%s) - start )) s"
