#!/usr/bin/env python3
"""Random-weight f16 models of real model shapes in the families of scripts/tiny_family.py, for
speed only (scripts/bench-vs-peers.sh SHAPE=qwen25-05b or llama32-1b): the family's keys,
tensors and vocabulary at the size people download, so a slow path a family adds shows.

    /usr/bin/python3 scripts/make-family-bench.py qwen25-05b /tmp/qwen25-05b-f16.gguf

Matrices are f16 (llama-quantize makes the other types from it), norms and biases f32.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_family as tf  # noqa: E402
import tiny_gguf as gg  # noqa: E402

# Qwen2.5-0.5B: 24 layers of 896, 14 query heads and 2 KV heads of 64, ff 4864, tied output.
# Llama 3.2 1B: 16 layers of 2048, 32 query heads and 8 KV heads of 64, ff 8192, tied output,
# rope_freqs.weight (Llama 3's frequency factors).
SHAPES = {
    "qwen25-05b": dict(tf.FAMILIES["qwen2"], seed=4901, n_embd=896, n_layer=24, n_head=14, n_head_kv=2, head_dim=64,
                       n_ff=4864, n_ctx=32768, tied=True),
    "llama32-1b": dict(tf.FAMILIES["llama3"], seed=4902, n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, head_dim=64,
                       n_ff=8192, n_ctx=131072),
}


def build(shape):
    c = SHAPES[shape]
    vkv = tf.vocab_kvs(c)
    n_vocab = len(dict((k, v) for k, _, v in vkv)["tokenizer.ggml.tokens"][1])
    tensors = []
    if c["rope_freqs"]:
        tensors.append(("rope_freqs.weight", tf.rope_freq_factors(c["head_dim"], c["rope_base"]), gg.GGML_F32))
    for number, (name, ne, scale, offset) in enumerate(tf.tensor_specs(c)):
        ne = [n_vocab if d is None else d for d in ne]
        w = tf.gen_tensor(c["seed"], number, int(np.prod(ne)), scale, offset).reshape(list(reversed(ne)))
        matrix = len(ne) == 2
        tensors.append((name, w.astype(np.float16) if matrix else w, gg.GGML_F16 if matrix else gg.GGML_F32))
    kvs = [kv if kv[0] != "general.file_type" else (kv[0], kv[1], 1) for kv in tf.model_kvs(c, n_vocab)]
    return kvs + vkv, tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out")
    a = ap.parse_args()
    kvs, tensors = build(a.shape)
    size = gg.write_gguf(a.out, kvs, tensors)
    print("%s: %s, %d tensors, %d bytes" % (a.out, a.shape, len(tensors), size))


if __name__ == "__main__":
    main()
