#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs two consumers against it:
# a C-only CMake project with find_package(kvgraph), and a plain compiler line from pkg-config;
# a shared build's exported names are listed and must be the installed headers' public API.
# ctest runs it on the static build; scripts/check-shared-install.sh on a shared one.
# usage: run.sh BUILD_DIR SOURCE_DIR MODEL GREEDY_FIXTURE (the first 8 ids are expected)
set -euo pipefail
build=$1; src=$2; model=$3
expected=$(tr -s ' \n' '  ' < "$4" | sed 's/^ //' | cut -d' ' -f1-8)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null

cmake -S "$src/tests/install/cmake-consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
"$work/cmake-build/consumer"

pcdir=$(dirname "$(find "$work/prefix" -name kvgraph.pc | head -1)")
export PKG_CONFIG_PATH="$pcdir"
c++ -std=c++17 "$src/tests/install/pkgconfig-consumer/main.cpp" -o "$work/pc-consumer" $(pkg-config --cflags --libs kvgraph)
# a plain compiler line links the shared library without an RPATH: the loader is told where
got=$(LD_LIBRARY_PATH="$(dirname "$pcdir")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/pc-consumer" "$model")
echo "tokens: $got"
[ "$(echo $got)" = "$(echo $expected)" ] || { echo "expected: $expected"; exit 1; }
test -x "$work/prefix/bin/kvg-generate"
"$work/prefix/bin/kvg-generate" --help > /dev/null # starts: finds its libraries (RPATH in a shared build)
# A shared library exports its public API only: every defined dynamic symbol is a name the
# installed headers declare (ggml_*, gguf_*, kvg_*), and every function they declare is exported.
check_exports() {
    local libs=("$work/prefix"/lib*/libkvgraph*.so) inc="$work/prefix/include/kvgraph"
    if [ ! -e "${libs[0]}" ]; then
        echo "exports: a static build (nothing exported)"
        return
    fi
    # declarations after the preprocessor (some are made by macros; comments are gone): a
    # prefixed name before "(", from every C header (ggml-cpp.h is inline C++ helpers)
    (cd "$inc" && ls *.h | grep -vx ggml-cpp.h | sed 's/.*/#include "&"/') | cc -E -P -I "$inc" -x c - |
        grep -oE '\b(ggml|gguf|kvg)_[a-z0-9_]+ *\(' | tr -d ' (' | sort -u > "$work/declared"
    nm -D --defined-only "${libs[@]}" | awk 'NF == 3 { print $3 }' | sort -u > "$work/exported"
    echo "exported by ${libs[*]##*/}: $(wc -l < "$work/exported") names"
    fold -s -w 120 <<< "$(tr '\n' ' ' < "$work/exported")" | sed 's/^/    /'
    local stray missing
    stray=$(comm -23 "$work/exported" "$work/declared")
    [ -z "$stray" ] || { echo "exported but not public:" $stray; exit 1; }
    missing=$(comm -13 "$work/exported" "$work/declared")
    [ -z "$missing" ] || { echo "declared but not exported:" $missing; exit 1; }
}
check_exports

# headers and libraries under their own names, beside where upstream ggml installs its own
test -f "$work/prefix/include/kvgraph/ggml.h"
test ! -e "$work/prefix/include/ggml.h"
ls "$work/prefix"/lib*/libkvgraph-ggml.* >/dev/null
echo "install consumers OK"
