#!/usr/bin/env bash
# The tiny real models (../shared/models: aidreams260K, stories260K with GQA) generating 128
# tokens on 1 thread: kvg-bench against llama2.c's run.c and, when given, llama.cpp's
# llama-bench (on the GGUF files kvg-convert-llama2c makes from the same checkpoints). The
# programs alternate, ROUNDS times each (default 12), and the table gives each one's best and
# median tok/s and kvgraph's ratios: these runs last milliseconds, so one busy moment on a
# shared host moves a single run by 30% or more. A benchmark: not run by CI.
#
#   scripts/bench-tiny-vs-peers.sh LLAMA2C_DIR [LLAMA_CPP_BIN|-]
#
# LLAMA2C_DIR: a checkout of karpathy/llama2.c. Its run.c reports tok/s from a millisecond
# clock, too coarse for ~4 ms runs: the script builds a copy (run_us, -Ofast -march=native as
# its README suggests) whose clock counts microseconds, the only change.
# Environment: ROUNDS (12), KVG_BUILD (kvgraph's build directory, default build).
set -euo pipefail
cd "$(dirname "$0")/.."
l2c=${1:?usage: $0 LLAMA2C_DIR [LLAMA_CPP_BIN|-]}
llama=${2:--}
rounds=${ROUNDS:-12}
kvg=${KVG_BUILD:-build}
models=../shared/models
cmake --build "$kvg" --target kvg-bench kvg-convert-llama2c > /dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed -e 's|return time.tv_sec \* 1000 + time.tv_nsec / 1000000;|return time.tv_sec * 1000000 + time.tv_nsec / 1000;|' \
    -e 's|(pos-1) / (double)(end-start)\*1000)|(pos-1) / (double)(end-start)*1000000)|' "$l2c/run.c" > "$work/run_us.c"
grep -q 'tv_nsec / 1000;' "$work/run_us.c" || { echo "run.c's timer was not found: llama2.c changed?" >&2; exit 1; }
gcc -Ofast -march=native "$work/run_us.c" -lm -o "$work/run_us"

cpu() { grep -m1 "^$1" /proc/cpuinfo | cut -d: -f2- | xargs; }
echo "$(date -u '+%F %H:%M UTC'), $(cpu 'model name') (family $(cpu 'cpu family'), model $(cpu 'model')), 1 thread, tg128, $rounds rounds"
for m in aidreams260K stories260K; do
    [ "$llama" != - ] && "$kvg/bin/kvg-convert-llama2c" "$models/$m.bin" "$work/$m.gguf" -z "$models/tok512.bin" --type f32 > /dev/null
    for _ in $(seq "$rounds"); do
        echo "$m kvgraph $("$kvg/bin/kvg-bench" -m "$models/$m.bin" -t 1 -p 0 -n 128 -r 3 --no-kv-write 2>&1 |
            awk -F'|' '/tg128/ {split($7, a, " "); print a[1]}')"
        echo "$m run.c $("$work/run_us" "$models/$m.bin" -z "$models/tok512.bin" -t 0 -n 128 -i Once 2>&1 |
            grep -o 'achieved tok/s: [0-9.]*' | awk '{print $3}')"
        if [ "$llama" != - ]; then
            echo "$m llama.cpp $("$llama/llama-bench" -m "$work/$m.gguf" -p 0 -n 128 -t 1 -r 3 -o csv 2> /dev/null |
                tail -1 | awk -F, '{gsub(/"/, "", $(NF-1)); print $(NF-1)}')"
        fi
    done
done | python3 -c '
import collections, sys
runs = collections.defaultdict(list)
for line in sys.stdin:
    f = line.split()
    if len(f) == 3:
        try: runs[(f[0], f[1])].append(float(f[2]))
        except ValueError: pass
def best(v): return max(v)
def median(v): return sorted(v)[len(v) // 2]
print("| model | program | best tok/s | median tok/s | kvgraph / it, best | kvgraph / it, median |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for (m, prog), v in sorted(runs.items()):
    k = runs.get((m, "kvgraph"), [])
    ratios = ("%.2f" % (best(k) / best(v)), "%.2f" % (median(k) / median(v))) if k and prog != "kvgraph" else ("", "")
    print("| %s | %s | %.0f | %.0f | %s | %s |" % (m, prog, best(v), median(v), ratios[0], ratios[1]))
'
