#!/usr/bin/env bash
# kvgraph against its peers on the same GGUF files, one program after the other, file by file:
# kvg-bench (best of --mmap 1 and --mmap 0: weights copied into transparent huge pages; f16
# files also with --f16-as-bf16 1, their matrices rounded to bf16 at load as ik_llama.cpp's -rtr 1
# does, for the pp rows only: tg rows keep the file's f16),
# llama.cpp's llama-bench (best of -fa 0,1) and, when given, ik_llama.cpp's llama-bench (-fa 1,
# best of -rtr 0 and -rtr 1, its run-time repacking, each also with -thp 1 and no mmap, its
# transparent huge pages). Prints the CPU and one
# table: tok/s of pp128 (128 prompt tokens in one batch; PP) and tg64 (64 tokens one at a time; TG),
# kvgraph ÷ the best peer, and kvg-bench's own yardsticks (pp: % of the compute peak, tg: % of
# the streaming-read bandwidth). The peers' tg rows run one thread count at a time between two
# reads of that yardstick (kvg-bench --stream-only), so their weight GB/s gets a share of it too:
# where a peer already reads near 100%, no program reading the same bytes can go much faster.
# A benchmark: not run by CI.
#
#   scripts/bench-vs-peers.sh LLAMA_CPP_BIN [IK_LLAMA_BIN|-] [MODELS_DIR]
#
# LLAMA_CPP_BIN: llama-bench and llama-quantize of llama.cpp (node-llama-cpp's gitRelease.bundle);
# IK_LLAMA_BIN: ik_llama.cpp's llama-bench ("-" or none: left out). Both built Release with
# -DGGML_NATIVE=OFF and the AVX switches the CPU has (ik_llama.cpp also needs -mavx512vl
# -mavx512dq in CMAKE_C(XX)_FLAGS for its AVX-512 path). MODELS_DIR (default
# /tmp/kvg-bench-models) keeps the models between runs: tl11-f16.gguf, random weights of the
# TinyLlama-1.1B shape (make-random-llama2c.py, needs python3 with numpy, then
# kvg-convert-llama2c), and tl11-TYPE.gguf made from it by llama-quantize (Q4_0 with --pure: all
# q4_0; the other types llama-quantize's usual mix).
# Environment: TYPES (default "Q8_0 Q4_0 Q4_K_M Q6_K"; F16 is the converted file, F32 a second
# conversion; BF16, IQ4_NL, ... work too), THREADS (1,2), REPS (3), PP (prompt tokens, 128),
# TG (generated tokens, 64; 0: none), SHAPE (tl11, default: TinyLlama-1.1B; s110: stories110M,
# dim 768, ff 2048, 12 layers, 12 heads, vocab 32000; qwen25-05b: Qwen2.5-0.5B's shape, qwen2
# architecture; llama32-1b: Llama 3.2 1B's shape with rope_freqs.weight; these two are written in
# f16 by make-family-bench.py with their family's vocabulary), KVG_BUILD (kvgraph's build
# directory, default build).
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${1:?usage: $0 LLAMA_CPP_BIN [IK_LLAMA_BIN|-] [MODELS_DIR]}
ik=${2:--}
work=${3:-/tmp/kvg-bench-models}
types=${TYPES:-Q8_0 Q4_0 Q4_K_M Q6_K}
threads=${THREADS:-1,2}
reps=${REPS:-3}
pp=${PP:-128}
tg=${TG:-64}
shape=${SHAPE:-tl11}
kvg=${KVG_BUILD:-build}
case $shape in
    tl11) dims="2048 5632 22 32 4 32000 2048" ;;
    s110) dims="768 2048 12 12 12 32000 1024" ;;
    qwen25-05b | llama32-1b) dims="" ;;
    *) echo "SHAPE: tl11, s110, qwen25-05b or llama32-1b" >&2; exit 1 ;;
esac
cmake --build "$kvg" --target kvg-bench kvg-convert-llama2c > /dev/null

mkdir -p "$work"
f16=$work/$shape-f16.gguf
if [ ! -f "$f16" ] && [ -z "$dims" ]; then
    /usr/bin/python3 scripts/make-family-bench.py "$shape" "$f16"
elif [ ! -f "$f16" ]; then
    python3 scripts/make-random-llama2c.py "$work/$shape.bin" $dims
    "$kvg/bin/kvg-convert-llama2c" "$work/$shape.bin" "$f16" -z ../shared/models/tokenizer.bin --type f16
    rm -f "$work/$shape.bin"
fi
models=()
for t in $types; do
    m=$work/$shape-$t.gguf
    [ "$t" = F16 ] && m=$f16
    [ "$t" = F32 ] && [ ! -f "$m" ] && "$kvg/bin/kvg-convert-llama2c" "$f16" "$m" --type f32
    pure=()
    [ "$t" = Q4_0 ] && pure=(--pure)
    [ -f "$m" ] || "$llama/llama-quantize" "${pure[@]}" "$f16" "$m" "$t" > /dev/null 2>&1
    models+=("$m")
done

cpu() { grep -m1 "^$1" /proc/cpuinfo | cut -d: -f2- | xargs; }
echo "$(date -u +%F), $(cpu 'model name') (family $(cpu 'cpu family'), model $(cpu 'model')), $(nproc) cores"
echo "flags: $(cpu flags)"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(-t "$threads" -p "$pp" -n "$tg" -r "$reps")
# the streaming-read yardstick (GB/s) with $1 threads, as kvg-bench measures it after each tg repetition
stream() { "$kvg/bin/kvg-bench" --stream-only -t "$1" | awk '{print $4}'; }
# A peer's llama-bench on $m (label, binary, its options): pp in one run, then tg one thread
# count at a time between two yardstick reads, so that its GB/s gets a share of the stream too
peer() {
    local label=$1 bin=$2 name nt s0
    shift 2
    name=$(basename "$m")
    "$bin" -m "$m" -t "$threads" -p "$pp" -n 0 -r "$reps" "$@" -o json > "$out/$label-pp-$name.json" 2> /dev/null
    [ "$tg" = 0 ] && return
    for nt in ${threads//,/ }; do
        s0=$(stream "$nt")
        "$bin" -m "$m" -t "$nt" -p 0 -n "$tg" -r "$reps" "$@" -o json > "$out/$label-tg$nt-$name.json" 2> /dev/null
        echo "$s0 $(stream "$nt")" > "$out/$label-tg$nt-$name.stream"
    done
}
for m in "${models[@]}"; do
    echo "running $(basename "$m") ..." >&2
    for mmap in 1 0; do
        "$kvg/bin/kvg-bench" -m "$m" "${common[@]}" --kv-type f16 --no-kv-write --mmap $mmap | sed "s/^|/|mmap$mmap|/" >> "$out/kvg.md"
    done
    # f16 files also with their matrices rounded to bf16 at load, the trade ik_llama.cpp's -rtr 1 makes
    if [ "$(basename "$m")" = "$(basename "$f16")" ]; then
        "$kvg/bin/kvg-bench" -m "$m" "${common[@]}" --kv-type f16 --no-kv-write --mmap 0 --f16-as-bf16 1 | sed "s/^|/|mmap0 f16-as-bf16|/" >> "$out/kvg.md"
    fi
    peer llama "$llama/llama-bench" -fa 0,1
    if [ "$ik" != - ]; then
        for rtr in 0 1; do
            peer ik$rtr "$ik/llama-bench" -fa 1 -rtr $rtr
            peer ikthp$rtr "$ik/llama-bench" -fa 1 -rtr $rtr -mmp 0 -thp 1
        done
    fi
done

python3 - "$out" "$ik" "$pp" "$tg" <<'EOF'
import glob, json, os, sys
out, have_ik, n_pp, n_tg = sys.argv[1], sys.argv[2] != '-', sys.argv[3], sys.argv[4]
best = {}   # (file, threads, pp|tg) -> {program: (tok/s, note)}
def put(f, nt, test, prog, ts, note):
    d = best.setdefault((os.path.basename(f), int(nt), test), {})
    if ts > d.get(prog, (0, ''))[0]: d[prog] = (ts, note)
mb = {}     # file -> weight MB one token reads (kvg-bench's tg rows)
for line in open(f'{out}/kvg.md'):
    c = [x.strip() for x in line.split('|')]  # c[1]: mmap0/mmap1, then kvg-bench's columns
    # f16 rounded to bf16 is a trade for prompts (as ik_llama.cpp's -rtr 1): tg keeps the file's f16
    if len(c) > 13 and c[6][:2] in ('pp', 'tg') and not (c[6][:2] == 'tg' and 'f16-as-bf16' in c[1]):
        yard = c[13] if c[6][:2] == 'pp' else c[10]
        put(c[2], c[5], c[6][:2], 'kvg', float(c[7].split()[0]), f'{yard} {c[1]}')
        if c[6][:2] == 'tg': mb[c[2]] = float(c[8])
for prog in ['llama'] + (['ik0', 'ik1', 'ikthp0', 'ikthp1'] if have_ik else []):
    for p in glob.glob(f'{out}/{prog}-*.json'):
        # a tg run's yardstick, read before and after it: the peer's GB/s as a share of their mean
        yard = open(p[:-5] + '.stream').read().split() if os.path.exists(p[:-5] + '.stream') else []
        for r in json.load(open(p)):
            if prog == 'llama': note = f"fa{int(r['flash_attn'])}"
            else: note = f"rtr{int(r['repack'])}" + (' thp' if r.get('use_thp') else '')
            f = os.path.basename(r['model_filename'])
            if yard and f in mb and float(yard[0]) + float(yard[1]) > 0:
                note += f" {100 * r['avg_ts'] * mb[f] / 1e3 / ((float(yard[0]) + float(yard[1])) / 2):.0f}%"
            put(f, r['n_threads'], 'pp' if r['n_prompt'] else 'tg', prog[:2], r['avg_ts'], note)
peers = ['ll'] + (['ik'] if have_ik else [])
names = {'ll': 'llama.cpp', 'ik': 'ik_llama'}
head = ['file', 'thr']
tests = ['pp'] + (['tg'] if n_tg != '0' else [])  # TG=0: kvg-bench still runs a tg1, left out
label = {'pp': (f'pp{n_pp}', '% peak'), 'tg': (f'tg{n_tg}', '% stream')}
for test in tests:
    head += [f'{label[test][0]} kvgraph'] + [names[p] for p in peers] + ['ratio', f'kvg {label[test][1]}']
print('\n| ' + ' | '.join(head) + ' |')
print('| --- | ---: |' + ' ---: |' * (len(head) - 2))
cell = lambda v: f'{v[0]:.1f} {v[1]}' if v else '-'
for (f, nt) in dict.fromkeys(k[:2] for k in best):  # kvg-bench's order
    row = [f, str(nt)]
    for test in tests:
        d = best.get((f, nt, test), {})
        kv, top = d.get('kvg'), max((d[p][0] for p in peers if p in d), default=0)
        row += [f'{kv[0]:.1f}' if kv else '-'] + [cell(d.get(p)) for p in peers]
        row += [f'{kv[0] / top:.2f}' if kv and top else '-', kv[1] if kv else '-']
    print('| ' + ' | '.join(row) + ' |')
print('\ntok/s, mean of the repetitions; ratio: kvgraph ÷ the best peer. Peers: the winning setting beside each;'
      ' tg: also its weight GB/s as a % of the streaming read measured just before and after its run.')
EOF
