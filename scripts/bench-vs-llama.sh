#!/usr/bin/env bash
# kvg-bench and llama.cpp's llama-bench on the same GGUF files, one after the other on the
# same machine: a random-weight model of the TinyLlama-1.1B shape in f16, quantized by
# llama.cpp's own llama-quantize to Q8_0, Q4_0, Q4_K_M and Q6_K. A benchmark: not run by CI.
#
#   scripts/bench-vs-llama.sh LLAMA_CPP_BUILD_BIN [WORK_DIR]
#
# LLAMA_CPP_BUILD_BIN: a directory with llama-bench and llama-quantize (llama.cpp from the npm
# package node-llama-cpp's gitRelease.bundle, built with cmake -DLLAMA_BUILD_TOOLS=ON
# -DGGML_NATIVE=OFF and the AVX switches the CPU has). WORK_DIR (default /tmp/kvg-bench-models)
# keeps the models (about 6 GB) between runs. Needs python3 with numpy for the checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: $0 LLAMA_CPP_BUILD_BIN [WORK_DIR]}
work=${2:-/tmp/kvg-bench-models}
threads=${THREADS:-1,2}
mkdir -p "$work"
cmake --build build --target kvg-bench kvg-convert-llama2c > /dev/null
if [ ! -f "$work/tl11-f16.gguf" ]; then
    python3 scripts/make-random-llama2c.py "$work/tl11.bin" 2048 5632 22 32 4 32000 2048
    build/bin/kvg-convert-llama2c "$work/tl11.bin" "$work/tl11-f16.gguf" -z ../shared/models/tokenizer.bin --type f16
    rm -f "$work/tl11.bin"
fi
models=()
for t in Q8_0 Q4_0 Q4_K_M Q6_K; do
    [ -f "$work/tl11-$t.gguf" ] || "$bin/llama-quantize" "$work/tl11-f16.gguf" "$work/tl11-$t.gguf" "$t" > /dev/null 2>&1
    models+=("$work/tl11-$t.gguf")
done
margs=()
for m in "${models[@]}"; do margs+=(-m "$m"); done
echo "== kvgraph ($(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores)"
build/bin/kvg-bench "${margs[@]}" -t "$threads" -p 128 -n 64 -r 3 --kv-type f16 --no-kv-write
echo "== llama.cpp"
"$bin/llama-bench" "${margs[@]}" -t "$threads" -p 128 -n 64 -r 3
