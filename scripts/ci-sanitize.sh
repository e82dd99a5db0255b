#!/usr/bin/env bash
# The whole ctest suite under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan),
# then the executor / hazard / allocator / multi-graph tests and two multi-threaded model runs
# (test-model, test-kv-grouped) under ThreadSanitizer (build-tsan). Not test-kv-modes:
# its resident-memory checks cannot hold under TSan's shadow memory.
# Any sanitizer report fails the run (UB is not recoverable: -fno-sanitize-recover).
#
#   scripts/ci-sanitize.sh            # both
#   scripts/ci-sanitize.sh asan       # or: tsan
#
# Uses clang when present (CC/CXX override), else gcc; installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

WHAT="${1:-all}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
TSAN_TESTS="${TSAN_TESTS:-executor|hazards|alloc|graphs|test-model$|kv-grouped}"
if [ -z "${CC:-}" ] || [ -z "${CXX:-}" ]; then
    if command -v clang > /dev/null && command -v clang++ > /dev/null; then
        CC=clang CXX=clang++
    else
        CC=gcc CXX=g++
    fi
fi
echo "ci-sanitize: compilers $CC / $CXX"

export KVG_SHARED_DIR="${KVG_SHARED_DIR:-$(cd .. && pwd)/shared}"
# allocator_may_return_null: an absurd allocation fails as it would without ASan, so the
# code's own "cannot allocate" path is what gets tested
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"

configure() { # dir, extra cmake args...
    local dir="$1"
    shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" "$@"
}

if [ "$WHAT" = all ] || [ "$WHAT" = asan ]; then
    echo "== ASan + UBSan: build-asan, the whole test suite"
    configure build-asan -DKVG_SANITIZE=ON -DKVG_TSAN=OFF
    cmake --build build-asan -j "$JOBS"
    # install-consumers builds projects against the installed static libraries without the
    # sanitizer runtime (link errors by design): it tests packaging, the normal build runs it
    (cd build-asan && ctest --output-on-failure -j "$JOBS" -E '^install-consumers$')
fi

if [ "$WHAT" = all ] || [ "$WHAT" = tsan ]; then
    echo "== TSan: build-tsan, tests matching '$TSAN_TESTS'"
    configure build-tsan -DKVG_TSAN=ON -DKVG_SANITIZE=OFF -DKVG_BUILD_EXAMPLES=OFF
    # build only the tests that run (test names are their executables' names)
    mapfile -t names < <(cd build-tsan && ctest -N -R "$TSAN_TESTS" | sed -n 's/^ *Test *#[0-9]*: *//p')
    if [ ${#names[@]} -eq 0 ]; then
        echo "ci-sanitize: no test matches '$TSAN_TESTS'" >&2
        exit 1
    fi
    targets=()
    for n in "${names[@]}"; do targets+=(--target "$n"); done
    cmake --build build-tsan -j "$JOBS" "${targets[@]}"
    (cd build-tsan && ctest --output-on-failure -j "$JOBS" -R "$TSAN_TESTS")
fi
echo "ci-sanitize: passed"
