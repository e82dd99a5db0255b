#!/usr/bin/env python3
"""A random-weight llama2.c checkpoint (legacy format: 7 int32 header fields, then f32 weights,
then the unused RoPE tables) of a given shape, for speed measurements only.
usage: make-random-llama2c.py OUT.bin DIM FF LAYERS HEADS KV_HEADS VOCAB SEQ
  stories110M shape: 768 2048 12 12 12 32000 1024; TinyLlama-1.1B shape: 2048 5632 22 32 4 32000 2048"""
import sys

import numpy as np

dim, ff, L, H, KV, V, seq = [int(v) for v in sys.argv[2:9]]
rng = np.random.default_rng(0)
hd = dim // H
with open(sys.argv[1], 'wb') as f:
    np.array([dim, ff, L, H, KV, V, seq], dtype=np.int32).tofile(f)
    def w(*shape, scale=0.02):
        (rng.standard_normal(size=shape, dtype=np.float32) * scale).tofile(f)
    w(V, dim)
    np.ones((L, dim), np.float32).tofile(f)
    w(L, dim, dim); w(L, KV * hd, dim); w(L, KV * hd, dim); w(L, dim, dim)
    np.ones((L, dim), np.float32).tofile(f)
    w(L, ff, dim); w(L, dim, ff); w(L, ff, dim)
    np.ones((dim,), np.float32).tofile(f)
    np.zeros(2 * seq * (hd // 2), np.float32).tofile(f)  # freq_cis_real, freq_cis_imag (unused)
    # positive vocab size: the classifier is the embedding table (tied)
