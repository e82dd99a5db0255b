#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined) in build-fuzz and
# runs each for $FUZZ_SECONDS (default 60) from the seeds in tests/fuzz/corpus/<target>.
# Fails if any target crashes, leaks, hits UB, times out on an input or runs out of memory;
# the reproducer is left in build-fuzz/artifacts/. Prints executions and coverage per target.
#
#   scripts/fuzz.sh                 # all targets, 60 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh gguf
#   build-fuzz/tests/fuzz/fuzz-gguf CRASH_FILE     # replay one input
#
# Needs clang and libclang-rt-14-dev (libFuzzer); installs nothing.
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET="${FUZZ_SECONDS:-60}"
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(gguf llama2c tokenizer-bin tokenize state rpc)
CC_BIN="${FUZZ_CC:-clang}"
CXX_BIN="${FUZZ_CXX:-clang++}"

if ! command -v "$CXX_BIN" > /dev/null; then
    echo "fuzz.sh: $CXX_BIN not found (install clang and libclang-rt-14-dev)" >&2
    exit 1
fi

mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
    -DKVG_FUZZ=ON -DKVG_SANITIZE=ON -DKVG_BUILD_TESTS=OFF -DKVG_BUILD_EXAMPLES=OFF > "$BUILD/cmake-configure.log" 2>&1 \
    || { cat "$BUILD/cmake-configure.log"; echo "fuzz.sh: cmake configure failed" >&2; exit 1; }
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
BUILD_TARGETS=()
for t in "${TARGETS[@]}"; do BUILD_TARGETS+=(--target "fuzz-$t"); done
cmake --build "$BUILD" -j "$JOBS" "${BUILD_TARGETS[@]}" || { echo "fuzz.sh: build failed" >&2; exit 1; }

export KVG_SHARED_DIR="${KVG_SHARED_DIR:-$(cd .. && pwd)/shared}"
# leaks and UB count as crashes; keep the reports short
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

mkdir -p "$BUILD/artifacts" "$BUILD/logs"
failed=()
summary=()
for t in "${TARGETS[@]}"; do
    exe="$BUILD/tests/fuzz/fuzz-$t"
    work="$BUILD/corpus/$t"          # new inputs go here, not into the repository
    seeds="tests/fuzz/corpus/$t"
    log="$BUILD/logs/$t.log"
    mkdir -p "$work"
    extra=()
    [ -f "tests/fuzz/$t.dict" ] && extra+=("-dict=tests/fuzz/$t.dict")
    more=()
    if [ "$t" = gguf ]; then # llama-quantize's files of every weight type kvgraph reads (fixtures)
        more=("$BUILD/seeds-quant")
        mkdir -p "${more[0]}"
        for f in tests/fixtures/gguf-quant/*.gguf; do ln -sf "$PWD/$f" "${more[0]}/"; done
    fi
    n_seeds=$(ls "$seeds" | wc -l)
    [ ${#more[@]} -eq 0 ] || n_seeds=$((n_seeds + $(ls "${more[0]}" | wc -l)))
    echo "== fuzz-$t: ${SECONDS_PER_TARGET}s from $n_seeds seeds"
    # fixed seed: a CI run explores the same inputs as a local run of the same length
    "$exe" -seed="${FUZZ_SEED:-1}" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -timeout=25 -rss_limit_mb=4096 \
        -malloc_limit_mb=2048 -artifact_prefix="$BUILD/artifacts/$t-" "${extra[@]}" "$work" "$seeds" "${more[@]}" > "$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    last=$(grep -E '^#[0-9]+.*cov: [0-9]+' "$log" | tail -1)
    cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
    ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*')
    corp=$(echo "$last" | grep -o 'corp: [0-9]*' | grep -o '[0-9]*')
    line=$(printf '%-14s execs %-10s cov %-6s ft %-6s corpus %-6s' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}")
    if [ $rc -ne 0 ]; then
        failed+=("$t")
        line="$line FAILED (exit $rc)"
        echo "---- fuzz-$t failed; end of $log:"
        tail -n 60 "$log"
        ls -1 "$BUILD/artifacts/$t-"* 2>/dev/null | sed 's/^/reproducer: /'
    else
        line="$line ok"
    fi
    echo "$line"
    summary+=("$line")
done

echo
echo "== fuzz summary (${SECONDS_PER_TARGET}s per target)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz.sh: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: all ${#TARGETS[@]} targets ran without a crash"
