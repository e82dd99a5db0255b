#!/bin/bash
# Writes tests/fixtures/perplexity/llama-perplexity.txt: llama.cpp's llama-perplexity on each
# family's tiny model (scripts/tiny_family.py) over tests/fixtures/perplexity/text.txt, 64-token
# chunks, 1 thread, f32 KV cache, flash attention off. tests/test-perplexity.cpp runs kvg-perplexity the
# same way and compares. Run from the repository root:
#   LLAMA_CPP=/work/peers/llama.cpp scripts/perplexity-ref.sh
set -euo pipefail
L=${LLAMA_CPP:-/work/peers/llama.cpp}
OUT=tests/fixtures/perplexity/llama-perplexity.txt
TEXT=tests/fixtures/perplexity/text.txt
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
C=$(git -C "$L" rev-parse --short HEAD)
{
    echo "# llama.cpp $C llama-perplexity -m FAMILY.gguf -f $TEXT -c 64 -b 64 -t 1 -fa off -ctk f32 -ctv f32"
    echo "# (FAMILY.gguf: /usr/bin/python3 scripts/tiny_family.py FAMILY FAMILY.gguf; written by scripts/perplexity-ref.sh)"
    echo "# family, chunks, final estimate, the running estimate after each chunk"
} > "$OUT"
for f in llama3 llama3-norf smollm3 qwen2 qwen3 phi3 phi3-long mistral gemma2 gemma3; do
    LLAMA_CPP_MODELS=$L/models /usr/bin/python3 scripts/tiny_family.py "$f" "$TMP/$f.gguf" > /dev/null
    final=
    for try in 1 2 3 4 5; do # its logger thread now and then loses the last lines at exit: run again
        "$L/build/bin/llama-perplexity" -m "$TMP/$f.gguf" -f "$TEXT" -c 64 -b 64 -t 1 -fa off -ctk f32 -ctv f32 > "$TMP/out" 2> "$TMP/err"
        final=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$TMP/out" "$TMP/err")
        [ -n "$final" ] && break
    done
    [ -n "$final" ] || { echo "no final estimate for $f" >&2; exit 1; }
    chunks=$(grep -ho '\[[0-9]*\][0-9.]*' "$TMP/out" "$TMP/err" | sed 's/\[[0-9]*\]//')
    echo "$f $(echo "$chunks" | wc -l) $final $(echo $chunks)" >> "$OUT"
    rm -f "$TMP/$f.gguf"
done
cat "$OUT"
