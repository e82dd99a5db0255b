#!/usr/bin/env python3
"""Tiny random f32 models of the model families of issue 45, with llama.cpp's keys and tensor
names and a real vocabulary, to compare kvgraph with llama.cpp (scripts/README-family.md).

    /usr/bin/python3 scripts/tiny_family.py llama3 /tmp/llama3.gguf
    /usr/bin/python3 scripts/tiny_family.py --list

Weights come from a counter-based hash, not from numpy's generators, so a C++ test can write the
same file without Python (tests/test-family.cpp has the twin of gen_tensor):
    stream  = splitmix64(seed * 2^32 + tensor_number)
    h[i]    = splitmix64(stream + i)                      (mod 2^64, i = flat element index)
    w[i]    = float32(offset + ((h[i] >> 40) * 2^-24 - 0.5) * scale)
tensor_number counts the random tensors in tensor_specs order. rope_freqs.weight is computed, not
drawn, so the control without it (llama3-norf) has the very same weights. offset + scaled value is
exact in double; the one rounding, to float32, is IEEE round-to-nearest in numpy and in C++.
Needs numpy only; use /usr/bin/python3 here (the pyenv python3 first on PATH has no numpy).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_gguf as gg  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_VOCAB = os.path.join(REPO, "..", "shared", "vocab")
LLAMA_CPP_MODELS = os.environ.get("LLAMA_CPP_MODELS", "/work/peers/llama.cpp/models")

# Every family: arch, vocabulary file, shape and the keys that change the arithmetic.
_QWEN_VOCAB = os.path.join(LLAMA_CPP_MODELS, "ggml-vocab-qwen2.gguf")
FAMILIES = {
    "llama3": dict(arch="llama", vocab=os.path.join(SHARED_VOCAB, "ggml-vocab-llama-bpe.gguf"), seed=4501,
                   n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=16, n_ff=128, n_ctx=2048,
                   rope_base=500000.0, rms_eps=1e-5, rope_freqs=True, add_bos=True, tied=True, qkv_bias=False,
                   qk_norm=False, head_keys=False, fused=False),
    # Qwen2/2.5: Q/K/V biases, NEOX rope, no BOS; untied (as Qwen2.5 7B), so output.weight is read
    "qwen2": dict(arch="qwen2", vocab=_QWEN_VOCAB, seed=4502, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
                  head_dim=16, n_ff=128, n_ctx=2048, rope_base=1000000.0, rms_eps=1e-6, rope_freqs=False,
                  add_bos=False, tied=False, qkv_bias=True, qk_norm=False, head_keys=False, fused=False),
    # Qwen3: per-head RMS norm of Q and K, head size 32 with n_embd 64 (4 heads: Q is 128 wide)
    "qwen3": dict(arch="qwen3", vocab=_QWEN_VOCAB, seed=4503, n_embd=64, n_layer=2, n_head=4, n_head_kv=2,
                  head_dim=32, n_ff=128, n_ctx=2048, rope_base=1000000.0, rms_eps=1e-6, rope_freqs=False,
                  add_bos=False, tied=True, qkv_bias=False, qk_norm=True, head_keys=True, fused=False),
    # Phi-3/3.5/4-mini: fused QKV and gate+up matrices, NEOX rope, SentencePiece vocabulary, untied
    "phi3": dict(arch="phi3", vocab=os.path.join(LLAMA_CPP_MODELS, "ggml-vocab-phi-3.gguf"), seed=4504, n_embd=64,
                 n_layer=2, n_head=4, n_head_kv=2, head_dim=16, n_ff=128, n_ctx=2048, rope_base=10000.0,
                 rms_eps=1e-5, rope_freqs=False, add_bos=True, tied=False, qkv_bias=False, qk_norm=False,
                 head_keys=False, fused=True),
}
# Variants: the same weights with one thing changed.
FAMILIES["llama3-norf"] = dict(FAMILIES["llama3"], rope_freqs=False)  # the control: no rope_freqs.weight
# YaRN (factor 4 over an original context of 32, so the prompt's positions pass it), as files of
# Qwen2.5 and Llama 3 variants extended to long contexts carry it
FAMILIES["llama3-yarn"] = dict(FAMILIES["llama3-norf"], yarn=(4.0, 32))
# SmolLM3: llama's layer and Llama 3's vocabulary, no rope on every fourth layer (the 4th of 4 here)
FAMILIES["smollm3"] = dict(FAMILIES["llama3-norf"], arch="smollm3", seed=4505, n_layer=4)
# Phi-3.5/Phi-4-mini LongRoPE: phi3's weights with rope_factors_long/short.weight, an original
# context and convert_hf_to_gguf.py's attention factor sqrt(1 + ln(n_ctx / orig) / ln(orig))
# (rounded to 4 digits). llama-ref's context of 256 exceeds 128 (the long table) but not 512
# (the short one).
FAMILIES["phi3-long"] = dict(FAMILIES["phi3"], longrope=(128, 1.2536))   # 2048 / 128 = 16
FAMILIES["phi3-short"] = dict(FAMILIES["phi3"], longrope=(512, 1.1055))  # 2048 / 512 = 4
# Mistral: a llama file with attention.sliding_window, which llama.cpp's llama graph ignores (full
# attention); 32 is shorter than the prompt, so a runtime that applied it would differ.
# SentencePiece vocabulary, untied output, rope base 1e6 (Mistral 7B v0.2 and later).
FAMILIES["mistral"] = dict(FAMILIES["llama3-norf"], vocab=os.path.join(SHARED_VOCAB, "ggml-vocab-llama-spm.gguf"),
                           seed=4506, rope_base=1000000.0, tied=False, sliding_window=32)
# LongRoPE's tables (per rotated pair: head_dim / 2 = 8), exact in float32; the long one stretches
# the low frequencies far more, as Phi-3.5's do.
ROPE_LONG = [1.0, 1.25, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0]
ROPE_SHORT = [1.0, 1.0, 1.125, 1.25, 1.5, 2.0, 2.5, 3.0]
# Gemma 2: GELU, post-attention/post-ffw norms, embeddings times sqrt(n_embd), soft-capped
# attention scores and logits, a window of 16 on layer 0 (every other layer); SentencePiece
# vocabulary without the space prefix, as Gemma files have it
_GEMMA = dict(FAMILIES["qwen3"], vocab=os.path.join(SHARED_VOCAB, "ggml-vocab-llama-spm.gguf"), rope_base=10000.0,
              add_bos=True, qk_norm=False, post_norms=True, no_space_prefix=True, swa=16)
FAMILIES["gemma2"] = dict(_GEMMA, arch="gemma2", seed=4506, softcap=(1.5, 4.0))
# Gemma 3: per-head Q/K norms, global layers (the 6th) at base 1e6 with linear scaling 8, the five
# sliding-window layers at llama.cpp's local base 10000 unscaled; no soft-capping
FAMILIES["gemma3"] = dict(_GEMMA, arch="gemma3", seed=4507, n_layer=6, qk_norm=True, rope_base=1000000.0,
                          linear=8.0)
# 256 wide, for the Q4_K_M check (k-quants take rows of 256; tests/test-family-quant.cpp): matrices
# at half the scale (4x the fan-in); qwen3 keeps a Q wider than n_embd (heads of 128)
for _f in ("llama3", "qwen2", "qwen3", "phi3", "smollm3", "gemma2", "gemma3"):
    FAMILIES[_f + "-256"] = dict(FAMILIES[_f], n_embd=256, n_ff=512, head_dim=128 if _f == "qwen3" else 64,
                                 mat_scale=0.5)

M64 = (1 << 64) - 1


def splitmix64(x):
    """Vectorized splitmix64 finalizer over a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def gen_tensor(seed, number, n, scale, offset=0.0):
    """n float32 values of random tensor `number` (see the module comment), in chunks to bound memory."""
    stream = int(splitmix64(np.array([(seed * (1 << 32) + number) & M64], dtype=np.uint64))[0])
    out = np.empty(n, dtype=np.float32)
    chunk = 1 << 20
    for s in range(0, n, chunk):
        idx = np.arange(s, min(n, s + chunk), dtype=np.uint64)
        with np.errstate(over="ignore"):
            h = splitmix64(idx + np.uint64(stream))
        u = (h >> np.uint64(40)).astype(np.float64) * 2.0 ** -24
        out[s:s + len(idx)] = (offset + (u - 0.5) * scale).astype(np.float32)
    return out


def rope_freq_factors(head_dim, base, factor=8.0, low=1.0, high=4.0, orig_ctx=256):
    """Llama 3's per-pair factors (1 for short wavelengths, `factor` for long ones, smooth between),
    with a small original context so that positions of a short prompt feel them; rounded to
    1/256 so that the C++ twin's libm cannot differ in the last bit."""
    out = []
    for i in range(head_dim // 2):
        wavelen = 2 * np.pi * base ** (2 * i / head_dim)
        if wavelen < orig_ctx / high:
            f = 1.0
        elif wavelen > orig_ctx / low:
            f = factor
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            f = 1.0 / ((1 - smooth) / factor + smooth)
        out.append(round(f * 256) / 256)
    return np.array(out, dtype=np.float32)


def tensor_specs(c):
    """(name, ggml ne, scale, offset) of every random tensor, in tensor_number order; matrices
    get scale ~ 1/sqrt(fan-in) (a power of two), norms 1 +- 0.25."""
    e, ff, hd = c["n_embd"], c["n_ff"], c["head_dim"]
    q, kv = hd * c["n_head"], hd * c["n_head_kv"]
    specs = [("token_embd.weight", [e, None], 1.0, 0.0), ("output_norm.weight", [e], 0.5, 1.0)]
    if not c["tied"]:
        specs.append(("output.weight", [e, None], 0.5, 0.0))
    for i in range(c["n_layer"]):
        p = "blk.%d." % i
        specs.append((p + "attn_norm.weight", [e], 0.5, 1.0))
        if c["fused"]:  # one matrix: Q rows, then K, then V (V's half scale does not matter here)
            specs.append((p + "attn_qkv.weight", [e, q + 2 * kv], 0.25, 0.0))
        else:
            specs += [(p + "attn_q.weight", [e, q], 0.25, 0.0), (p + "attn_k.weight", [e, kv], 0.25, 0.0),
                      (p + "attn_v.weight", [e, kv], 0.5, 0.0)]
        if c["qkv_bias"]:
            specs += [(p + "attn_q.bias", [q], 0.5, 0.0), (p + "attn_k.bias", [kv], 0.5, 0.0),
                      (p + "attn_v.bias", [kv], 0.5, 0.0)]
        if c["qk_norm"]:
            specs += [(p + "attn_q_norm.weight", [hd], 0.5, 1.0), (p + "attn_k_norm.weight", [hd], 0.5, 1.0)]
        specs.append((p + "attn_output.weight", [q, e], 0.25, 0.0))
        if c.get("post_norms"):
            specs.append((p + "post_attention_norm.weight", [e], 0.5, 1.0))
        specs.append((p + "ffn_norm.weight", [e], 0.5, 1.0))
        if c["fused"]:  # gate rows, then up rows
            specs.append((p + "ffn_up.weight", [e, 2 * ff], 0.5, 0.0))
        else:
            specs += [(p + "ffn_gate.weight", [e, ff], 0.5, 0.0), (p + "ffn_up.weight", [e, ff], 0.5, 0.0)]
        specs.append((p + "ffn_down.weight", [ff, e], 0.25, 0.0))
        if c.get("post_norms"):
            specs.append((p + "post_ffw_norm.weight", [e], 0.5, 1.0))
    m = c.get("mat_scale", 1.0)
    return [(n, ne, s * m if len(ne) == 2 and n != "token_embd.weight" else s, o) for n, ne, s, o in specs]


def model_kvs(c, n_vocab):
    a = c["arch"]
    kvs = [("general.architecture", gg.T_STRING, a), ("general.name", gg.T_STRING, "tiny-" + a),
           (a + ".block_count", gg.T_UINT32, c["n_layer"]), (a + ".context_length", gg.T_UINT32, c["n_ctx"]),
           (a + ".embedding_length", gg.T_UINT32, c["n_embd"]),
           (a + ".feed_forward_length", gg.T_UINT32, c["n_ff"]),
           (a + ".attention.head_count", gg.T_UINT32, c["n_head"]),
           (a + ".attention.head_count_kv", gg.T_UINT32, c["n_head_kv"]),
           (a + ".rope.freq_base", gg.T_FLOAT32, c["rope_base"]),
           (a + ".attention.layer_norm_rms_epsilon", gg.T_FLOAT32, c["rms_eps"]),
           ("general.file_type", gg.T_UINT32, 0), (a + ".vocab_size", gg.T_UINT32, n_vocab),
           (a + ".rope.dimension_count", gg.T_UINT32, c["head_dim"])]
    if c["head_keys"]:
        kvs += [(a + ".attention.key_length", gg.T_UINT32, c["head_dim"]),
                (a + ".attention.value_length", gg.T_UINT32, c["head_dim"])]
    if c.get("yarn"):
        kvs += [(a + ".rope.scaling.type", gg.T_STRING, "yarn"), (a + ".rope.scaling.factor", gg.T_FLOAT32, c["yarn"][0]),
                (a + ".rope.scaling.original_context_length", gg.T_UINT32, c["yarn"][1])]
    if c.get("longrope"):
        kvs += [(a + ".rope.scaling.attn_factor", gg.T_FLOAT32, c["longrope"][1]),
                (a + ".rope.scaling.original_context_length", gg.T_UINT32, c["longrope"][0])]
    if c.get("sliding_window"):
        kvs += [(a + ".attention.sliding_window", gg.T_UINT32, c["sliding_window"])]
    if c.get("linear"):
        kvs += [(a + ".rope.scaling.type", gg.T_STRING, "linear"), (a + ".rope.scaling.factor", gg.T_FLOAT32, c["linear"])]
    if c.get("swa"):
        kvs.append((a + ".attention.sliding_window", gg.T_UINT32, c["swa"]))
    if c.get("softcap"):
        kvs += [(a + ".attn_logit_softcapping", gg.T_FLOAT32, c["softcap"][0]),
                (a + ".final_logit_softcapping", gg.T_FLOAT32, c["softcap"][1])]
    return kvs


def vocab_kvs(c):
    """The vocabulary file's tokenizer.* keys (types kept), then add_bos_token as the family sets it."""
    kvs = [kv for kv in gg.read_gguf_kvs(c["vocab"]) if kv[0].startswith("tokenizer.")]
    kvs = [kv for kv in kvs if kv[0] != "tokenizer.ggml.add_bos_token"]
    kvs.append(("tokenizer.ggml.add_bos_token", gg.T_BOOL, c["add_bos"]))
    if c.get("no_space_prefix"):
        kvs.append(("tokenizer.ggml.add_space_prefix", gg.T_BOOL, False))
    return kvs


def build(family):
    """(kvs, tensors) of a family's model; tensors as write_gguf takes them."""
    c = FAMILIES[family]
    vkv = vocab_kvs(c)
    n_vocab = len(dict((k, v) for k, _, v in vkv)["tokenizer.ggml.tokens"][1])
    tensors = []
    if c["rope_freqs"]:
        tensors.append(("rope_freqs.weight", rope_freq_factors(c["head_dim"], c["rope_base"]), gg.GGML_F32))
    if c.get("longrope"):
        assert len(ROPE_LONG) == c["head_dim"] // 2
        tensors += [("rope_factors_long.weight", np.array(ROPE_LONG, dtype=np.float32), gg.GGML_F32),
                    ("rope_factors_short.weight", np.array(ROPE_SHORT, dtype=np.float32), gg.GGML_F32)]
    for number, (name, ne, scale, offset) in enumerate(tensor_specs(c)):
        ne = [n_vocab if d is None else d for d in ne]
        w = gen_tensor(c["seed"], number, int(np.prod(ne)), scale, offset)
        tensors.append((name, w.reshape(list(reversed(ne))), gg.GGML_F32))
    return model_kvs(c, n_vocab) + vkv, tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("family", nargs="?", choices=sorted(FAMILIES))
    ap.add_argument("out", nargs="?")
    ap.add_argument("--list", action="store_true", help="print the families and their settings")
    a = ap.parse_args()
    if a.list:
        for k in sorted(FAMILIES):
            print(k, FAMILIES[k])
        return
    if not a.family or not a.out:
        ap.error("FAMILY and OUT are needed")
    kvs, tensors = build(a.family)
    size = gg.write_gguf(a.out, kvs, tensors)
    print("%s: %s, %d tensors, %d bytes" % (a.out, a.family, len(tensors), size))


if __name__ == "__main__":
    main()
