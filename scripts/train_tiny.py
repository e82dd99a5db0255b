#!/usr/bin/python3
"""Train a tiny llama-architecture language model on the King James Bible and
export it as a single GGUF v3 file for the kvgraph runtime.

Everything here (tokenizer training, model, training loop; the GGUF writer/reader
in tiny_gguf.py beside it) is written from scratch with the Python standard
library, numpy and torch.

Typical use (Debian: apt-get install -y python3-torch python3-numpy bible-kjv):

    /usr/bin/python3 scripts/train_tiny.py --out models/kjv-tiny.gguf

Other modes:

    --check FILE        re-parse a GGUF file, verify it against the training
                        checkpoint (if present) and against the expected-output
                        files written next to it.
    --export-only       skip training, export from the checkpoint.
    --resume            continue training from the checkpoint.

The script is deterministic for a given --seed (single process, fixed thread
count, fixed data order).
"""

import argparse
import heapq
import json
import math
import os
import re
import subprocess
import sys
import time

# Sleep instead of spinning while waiting at OpenMP barriers: this machine is
# shared with compilers and test runs, where spinning threads waste our share.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# the GGUF writer and reader: numpy only, beside this script
from tiny_gguf import (GGML_F16, GGML_F32, T_ARRAY, T_BOOL, T_FLOAT32, T_INT32, T_STRING, T_UINT32, read_gguf, write_gguf)

SPACE = "\u2581"  # SentencePiece "lower one eighth block" used for spaces

UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
N_SPECIAL = 3
BYTE_BASE = N_SPECIAL  # ids 3..258 are <0x00>..<0xFF>

TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6

# ----------------------------------------------------------------------------
# corpus
# ----------------------------------------------------------------------------


def load_kjv(path=None):
    """Return the list of KJV verses (plain text, no references).

    With path=None the text is produced by the `bible` program from Debian's
    bible-kjv package (text in bible-kjv-text).  With a path, the file is
    expected to be either the raw output of `bible -l100000 Gen1:1-Rev22:21`
    or already one verse per line."""
    if path is None:
        try:
            raw = subprocess.run(
                ["bible", "-l100000", "Gen1:1-Rev22:21"],
                check=True, capture_output=True, text=True,
            ).stdout
        except FileNotFoundError:
            sys.exit("error: the `bible` program was not found; "
                     "apt-get install -y bible-kjv (or pass --corpus FILE)")
    else:
        with open(path, encoding="utf-8") as f:
            raw = f.read()
    verses = []
    verse_re = re.compile(r"^\s+\d+ (.*)$")
    saw_numbered = False
    for line in raw.split("\n"):
        m = verse_re.match(line)
        if m:
            saw_numbered = True
            verses.append(" ".join(m.group(1).split()))
    if not saw_numbered:  # plain one-verse-per-line file
        verses = [" ".join(l.split()) for l in raw.split("\n") if l.strip()]
    return verses


def split_train_val(verses, val_every=50, block=200):
    """Hold out one block of `block` verses out of every `val_every` blocks
    (2% of the text, spread across the whole book)."""
    train, val = [], []
    for i, v in enumerate(verses):
        if (i // block) % val_every == val_every // 2:
            val.append(v)
        else:
            train.append(v)
    return train, val


# ----------------------------------------------------------------------------
# tokenizer: byte-fallback BPE with SentencePiece / llama conventions
# ----------------------------------------------------------------------------

# Pre-tokenisation used only for *training* the merges and for caching
# encodings: runs of letters (optionally preceded by the space marker), single
# other characters (optionally preceded by the space marker), newlines.  No
# vocabulary piece ever spans two of these chunks, so encoding a whole text
# with the greedy algorithm equals concatenating the encodings of its chunks.
CHUNK_RE = re.compile("\n|" + SPACE + "?[A-Za-z']+|" + SPACE + "?[^A-Za-z'" + SPACE + "\n]|" + SPACE)


def normalize(text, add_dummy_prefix=True):
    s = text.replace(" ", SPACE)
    if add_dummy_prefix:
        s = SPACE + s
    return s


class Tokenizer:
    def __init__(self, tokens, scores, types):
        self.tokens = list(tokens)
        self.scores = [float(s) for s in scores]
        self.types = [int(t) for t in types]
        self.piece_to_id = {}
        for i, t in enumerate(self.tokens):
            self.piece_to_id.setdefault(t, i)
        self._cache = {}

    @property
    def n_vocab(self):
        return len(self.tokens)

    # -- the exact llama/SentencePiece greedy-by-score algorithm ------------
    def encode_normalized(self, s):
        """Encode an already normalised string (spaces replaced by U+2581)."""
        if not s:
            return []
        syms = list(s)  # one symbol per Unicode character (= UTF-8 character)
        n = len(syms)
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        heap = []  # (-score, left_index, left_text, right_text)

        def push(l, r):
            if l < 0 or r < 0:
                return
            tid = self.piece_to_id.get(syms[l] + syms[r])
            if tid is None:
                return
            # highest score first, then leftmost pair
            heapq.heappush(heap, (-self.scores[tid], l, syms[l], syms[r]))

        for i in range(n - 1):
            push(i, i + 1)
        while heap:
            _, l, lt, rt = heapq.heappop(heap)
            r = nxt[l]
            # skip stale entries (either side changed since the push)
            if syms[l] != lt or r < 0 or syms[r] != rt:
                continue
            syms[l] = lt + rt
            syms[r] = ""
            nxt[l] = nxt[r]
            if nxt[r] >= 0:
                prev[nxt[r]] = l
            push(prev[l], l)
            push(l, nxt[l])
        out = []
        i = 0
        while i >= 0 and i < n:
            piece = syms[i]
            tid = self.piece_to_id.get(piece)
            if tid is not None:
                out.append(tid)
            else:  # byte fallback
                out.extend(BYTE_BASE + b for b in piece.encode("utf-8"))
            i = nxt[i]
        return out

    def encode(self, text, add_bos=False):
        """Encode like llama.cpp's SPM tokenizer: dummy-prefix space, spaces to
        U+2581, greedy merges by score.  BOS is prepended if add_bos."""
        ids = [BOS_ID] if add_bos else []
        if text:
            ids += self.encode_normalized(normalize(text, True))
        return ids

    def encode_fast(self, s):
        """Same result as encode_normalized(s) but cached per pre-token chunk
        (used for the training corpus)."""
        out = []
        cache = self._cache
        for c in CHUNK_RE.findall(s):
            ids = cache.get(c)
            if ids is None:
                ids = self.encode_normalized(c)
                cache[c] = ids
            out.extend(ids)
        return out

    def decode(self, ids, strip_leading_space=True):
        bs = bytearray()
        for i in ids:
            t = self.types[i]
            if t == TT_BYTE:
                bs.append(int(self.tokens[i][3:5], 16))
            elif t == TT_NORMAL or t == TT_USER:
                bs += self.tokens[i].replace(SPACE, " ").encode("utf-8")
        s = bs.decode("utf-8", errors="replace")
        if strip_leading_space and s.startswith(" "):
            s = s[1:]
        return s


def encode_reference(tok, text):
    """Deliberately naive O(n^2) version of the same algorithm, used only to
    cross-check Tokenizer.encode."""
    syms = list(normalize(text, True)) if text else []
    while True:
        best, best_i = None, -1
        for i in range(len(syms) - 1):
            tid = tok.piece_to_id.get(syms[i] + syms[i + 1])
            if tid is not None and (best is None or tok.scores[tid] > best):
                best, best_i = tok.scores[tid], i
        if best_i < 0:
            break
        syms[best_i:best_i + 2] = [syms[best_i] + syms[best_i + 1]]
    out = []
    for p in syms:
        tid = tok.piece_to_id.get(p)
        if tid is not None:
            out.append(tid)
        else:
            out.extend(BYTE_BASE + b for b in p.encode("utf-8"))
    return out


def train_bpe(text, vocab_size, log=print):
    """Train BPE merges on `text` (raw text, lines joined by '\\n').

    Vocabulary layout: 0 <unk>, 1 <s>, 2 </s>, 3..258 byte tokens, then every
    character of the corpus, then merged pieces in merge order.  Merged pieces
    get score -(merge rank), characters get -1e6-(rank); so the greedy
    highest-score-first encoder replays the merges in training order."""
    norm = normalize(text, True)
    counts = {}
    for c in CHUNK_RE.findall(norm):
        counts[c] = counts.get(c, 0) + 1
    assert sum(len(c) * k for c, k in counts.items()) == len(norm)

    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    scores = [0.0, 0.0, 0.0] + [0.0] * 256
    types = [TT_UNKNOWN, TT_CONTROL, TT_CONTROL] + [TT_BYTE] * 256

    char_freq = {}
    for c, k in counts.items():
        for ch in c:
            char_freq[ch] = char_freq.get(ch, 0) + k
    chars = sorted(char_freq, key=lambda ch: (-char_freq[ch], ch))
    for r, ch in enumerate(chars):
        tokens.append(ch)
        scores.append(-1e6 - r)
        types.append(TT_NORMAL)
    piece_set = set(tokens)
    if len(tokens) >= vocab_size:
        raise ValueError("vocab_size too small for the character set")

    words = [list(c) for c in counts]
    freqs = [counts[c] for c in counts]
    pair_count = {}
    pair_words = {}
    for wi, w in enumerate(words):
        f = freqs[wi]
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] = pair_count.get((a, b), 0) + f
            pair_words.setdefault((a, b), set()).add(wi)

    n_merges = 0
    while len(tokens) < vocab_size and pair_count:
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))
        (a, b), cnt = best
        if cnt < 2:
            break
        merged = a + b
        n_merges += 1
        if merged not in piece_set:
            piece_set.add(merged)
            tokens.append(merged)
            scores.append(-float(n_merges))
            types.append(TT_NORMAL)
        for wi in list(pair_words.get((a, b), ())):
            w = words[wi]
            f = freqs[wi]
            for p in zip(w, w[1:]):  # remove old pairs
                pair_count[p] -= f
                if pair_count[p] == 0:
                    del pair_count[p]
                s = pair_words.get(p)
                if s is not None:
                    s.discard(wi)
            nw, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    nw.append(merged)
                    i += 2
                else:
                    nw.append(w[i])
                    i += 1
            words[wi] = nw
            for p in zip(nw, nw[1:]):  # add new pairs
                pair_count[p] = pair_count.get(p, 0) + f
                pair_words.setdefault(p, set()).add(wi)
        pair_words.pop((a, b), None)
    log("bpe: %d chars, %d merges, vocab %d" % (len(chars), n_merges, len(tokens)))
    return Tokenizer(tokens, scores, types)


# ----------------------------------------------------------------------------
# model (llama architecture)
# ----------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, n_pos, base):
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(n_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    """x: [B, T, H, hd]; rotate interleaved pairs (x[2i], x[2i+1]) by pos*theta_i
    (llama.cpp "normal" rope mode)."""
    B, T, H, D = x.shape
    xp = x.view(B, T, H, D // 2, 2)
    x0, x1 = xp[..., 0], xp[..., 1]
    c = cos[:T, None, :]
    s = sin[:T, None, :]
    y0 = x0 * c - x1 * s
    y1 = x0 * s + x1 * c
    return torch.stack((y0, y1), dim=-1).view(B, T, H, D)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, hd = cfg["dim"], cfg["head_dim"]
        self.n_head, self.n_kv, self.hd = cfg["n_head"], cfg["n_kv_head"], hd
        self.attn_norm = RMSNorm(d, cfg["eps"])
        self.wq = nn.Linear(d, self.n_head * hd, bias=False)
        self.wk = nn.Linear(d, self.n_kv * hd, bias=False)
        self.wv = nn.Linear(d, self.n_kv * hd, bias=False)
        self.wo = nn.Linear(self.n_head * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d, cfg["eps"])
        self.w1 = nn.Linear(d, cfg["ff"], bias=False)  # gate
        self.w3 = nn.Linear(d, cfg["ff"], bias=False)  # up
        self.w2 = nn.Linear(cfg["ff"], d, bias=False)  # down

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        H, KV, hd = self.n_head, self.n_kv, self.hd
        rep = H // KV
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, H, hd)
        k = self.wk(h).view(B, T, KV, hd)
        v = self.wv(h).view(B, T, KV, hd)
        q = apply_rope(q, cos, sin) * (1.0 / math.sqrt(hd))
        k = apply_rope(k, cos, sin)
        # grouped-query attention: query head h uses kv head h // rep (ggml's
        # broadcast convention).  Heads j*rep .. j*rep+rep-1 are stacked along
        # the time axis so that one matmul per kv head serves all of them.
        q = q.transpose(1, 2).reshape(B, KV, rep * T, hd)
        k = k.transpose(1, 2)  # [B, KV, T, hd]
        v = v.transpose(1, 2)
        att = q @ k.transpose(-2, -1)  # [B, KV, rep*T, T]
        att = torch.softmax(att + mask, dim=-1)
        a = (att @ v).view(B, H, T, hd).transpose(1, 2).reshape(B, T, H * hd)
        x = x + self.wo(a)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg["vocab"], cfg["dim"])
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layer"]))
        self.norm = RMSNorm(cfg["dim"], cfg["eps"])
        self.output = nn.Linear(cfg["dim"], cfg["vocab"], bias=False)
        cos, sin = rope_tables(cfg["head_dim"], cfg["ctx"], cfg["rope_base"])
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                s = std
                if name.endswith("wo.weight") or name.endswith("w2.weight"):
                    s = std / math.sqrt(2 * self.cfg["n_layer"])
                nn.init.normal_(p, mean=0.0, std=s)

    def forward(self, idx):
        T = idx.shape[1]
        rep = self.cfg["n_head"] // self.cfg["n_kv_head"]
        mask = torch.full((T, T), float("-inf")).triu(1).repeat(rep, 1)  # causal, [rep*T, T]
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, self.rope_cos, self.rope_sin, mask)
        return self.output(self.norm(x))


def gguf_tensor_map(cfg):
    """(gguf name, torch state_dict key) pairs, in file order."""
    m = [("token_embd.weight", "tok_embeddings.weight")]
    for i in range(cfg["n_layer"]):
        p = "layers.%d." % i
        m += [
            ("blk.%d.attn_norm.weight" % i, p + "attn_norm.weight"),
            ("blk.%d.attn_q.weight" % i, p + "wq.weight"),
            ("blk.%d.attn_k.weight" % i, p + "wk.weight"),
            ("blk.%d.attn_v.weight" % i, p + "wv.weight"),
            ("blk.%d.attn_output.weight" % i, p + "wo.weight"),
            ("blk.%d.ffn_norm.weight" % i, p + "ffn_norm.weight"),
            ("blk.%d.ffn_gate.weight" % i, p + "w1.weight"),
            ("blk.%d.ffn_up.weight" % i, p + "w3.weight"),
            ("blk.%d.ffn_down.weight" % i, p + "w2.weight"),
        ]
    m += [("output_norm.weight", "norm.weight"), ("output.weight", "output.weight")]
    return m


def export_gguf(path, model, tok, cfg, name, f16=False):
    sd = {k: v.detach().cpu().float().numpy() for k, v in model.state_dict().items()}
    tensors = []
    for gname, key in gguf_tensor_map(cfg):
        arr = sd[key]
        gtype = GGML_F16 if (f16 and arr.ndim == 2) else GGML_F32
        tensors.append((gname, arr, gtype))
    kvs = [
        ("general.architecture", T_STRING, "llama"),
        ("general.name", T_STRING, name),
        ("general.alignment", T_UINT32, 32),
        ("general.file_type", T_UINT32, 1 if f16 else 0),
        ("llama.context_length", T_UINT32, cfg["ctx"]),
        ("llama.embedding_length", T_UINT32, cfg["dim"]),
        ("llama.block_count", T_UINT32, cfg["n_layer"]),
        ("llama.feed_forward_length", T_UINT32, cfg["ff"]),
        ("llama.attention.head_count", T_UINT32, cfg["n_head"]),
        ("llama.attention.head_count_kv", T_UINT32, cfg["n_kv_head"]),
        ("llama.rope.dimension_count", T_UINT32, cfg["head_dim"]),
        ("llama.rope.freq_base", T_FLOAT32, float(cfg["rope_base"])),
        ("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, float(cfg["eps"])),
        ("llama.vocab_size", T_UINT32, tok.n_vocab),
        ("tokenizer.ggml.model", T_STRING, "llama"),
        ("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tok.tokens)),
        ("tokenizer.ggml.scores", T_ARRAY, (T_FLOAT32, tok.scores)),
        ("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, tok.types)),
        ("tokenizer.ggml.bos_token_id", T_UINT32, BOS_ID),
        ("tokenizer.ggml.eos_token_id", T_UINT32, EOS_ID),
        ("tokenizer.ggml.unknown_token_id", T_UINT32, UNK_ID),
        ("tokenizer.ggml.add_bos_token", T_BOOL, True),
        ("tokenizer.ggml.add_eos_token", T_BOOL, False),
    ]
    return write_gguf(path, kvs, tensors)


def load_from_gguf(path):
    """Build (model, tokenizer, cfg) from a GGUF file only."""
    kv, tensors, infos = read_gguf(path)
    dim = kv["llama.embedding_length"]
    n_head = kv["llama.attention.head_count"]
    cfg = dict(
        vocab=len(kv["tokenizer.ggml.tokens"]), dim=dim,
        n_layer=kv["llama.block_count"], n_head=n_head,
        n_kv_head=kv["llama.attention.head_count_kv"],
        head_dim=kv["llama.rope.dimension_count"],
        ff=kv["llama.feed_forward_length"], ctx=kv["llama.context_length"],
        rope_base=kv["llama.rope.freq_base"],
        eps=kv["llama.attention.layer_norm_rms_epsilon"],
    )
    model = Llama(cfg)
    sd = {}
    for gname, key in gguf_tensor_map(cfg):
        sd[key] = torch.from_numpy(tensors[gname].copy())
    model.load_state_dict(sd)
    model.eval()
    tok = Tokenizer(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"],
                    kv["tokenizer.ggml.token_type"])
    return model, tok, cfg, kv, tensors, infos


# ----------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------


class LineData:
    """Token stream of a list of lines (joined by '\\n') plus, for every line,
    its encoding with the dummy-prefix space (as a prompt would be encoded).
    A sample starting at line i is: BOS, encode(line_i), then the stream from
    the '\\n' that ends line i onwards."""

    def __init__(self, tok, lines):
        nl = tok.encode_fast("\n")
        assert len(nl) == 1
        stream, pref, nl_pos = [], [], []
        for i, line in enumerate(lines):
            s = normalize(line, add_dummy_prefix=False)
            stream.extend(tok.encode_fast(s) if i > 0 else tok.encode_fast(SPACE + s))
            nl_pos.append(len(stream))
            stream.extend(nl)
            pref.append(np.array(tok.encode_fast(SPACE + s), dtype=np.int64))
        self.stream = np.array(stream, dtype=np.int64)
        self.pref = pref
        self.nl_pos = np.array(nl_pos, dtype=np.int64)
        self.n_lines = len(lines)
        # lines whose sample fits entirely (need ctx+1 tokens)
        self.n_tokens = len(self.stream)

    def sample(self, line, n):
        p = self.pref[line]
        rest = self.stream[self.nl_pos[line]: self.nl_pos[line] + n]
        seq = np.concatenate([[BOS_ID], p, rest])[:n]
        if len(seq) < n:  # end of stream: pad with EOS, masked in the loss
            seq = np.concatenate([seq, np.full(n - len(seq), -1)])
        return seq

    def batch(self, lines, ctx):
        seqs = np.stack([self.sample(int(l), ctx + 1) for l in lines])
        x = torch.from_numpy(np.where(seqs[:, :-1] < 0, EOS_ID, seqs[:, :-1]))
        y = torch.from_numpy(seqs[:, 1:])
        return x, y


def max_start_line(data, ctx):
    """Largest line index whose sample still has ctx+1 real tokens."""
    limit = data.n_tokens - (ctx + 1)
    return int(np.searchsorted(data.nl_pos, limit, side="right"))


# ----------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------


def param_count(model):
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def evaluate(model, data, lines, ctx, bs=16):
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, len(lines), bs):
        x, y = data.batch(lines[i:i + bs], ctx)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1),
                               ignore_index=-1, reduction="sum")
        tot += loss.item()
        n += int((y >= 0).sum())
    model.train()
    return tot / n


def lr_at(step, total, lr, warmup, decay, min_ratio=0.05):
    """Warmup-stable-decay schedule: linear warmup, constant lr, then a linear
    decay to min_ratio*lr over the last `decay` steps.  Everything before
    step total-decay does not depend on `total`, so a run with --steps N can
    be continued from a stable-phase checkpoint of a longer run and gives the
    same result as a fresh run with --steps N."""
    if step < warmup:
        return lr * (step + 1) / warmup
    start = total - decay
    if step < start:
        return lr
    t = (step - start + 1) / max(1, decay)
    return lr * (1.0 - (1.0 - min_ratio) * min(1.0, t))


@torch.no_grad()
def generate(model, ids, n_new, temperature=0.0, gen=None, ctx=None):
    """Plain (cache-less) generation. temperature 0 = greedy argmax."""
    ctx = ctx or model.cfg["ctx"]
    ids = list(ids)
    out = []
    for _ in range(n_new):
        x = torch.tensor([ids[-ctx:]], dtype=torch.long)
        logits = model(x)[0, -1]
        if temperature <= 0:
            nxt = int(torch.argmax(logits))
        else:
            probs = torch.softmax(logits / temperature, dim=-1)
            nxt = int(torch.multinomial(probs, 1, generator=gen))
        ids.append(nxt)
        out.append(nxt)
    return out


TOKENIZER_TESTS = [
    "In the beginning God created the heaven and the earth.",
    "And God said, Let there be light: and there was light.",
    "Hello world",
    " leading space and  double  spaces ",
    "The LORD is my shepherd; I shall not want.",
    "Line one\nLine two",
    "numbers 1234 and symbols #@%&*",
    "caf\u00e9 na\u00efve \u00fcber",
    "emoji \U0001F600 and CJK \u4e2d\u6587",
    "thee thou thy hast hath saith",
    "a",
    "",
]


def write_expected(model, tok, cfg, args, base):
    prompt = args.prompt
    prompt_ids = tok.encode(prompt, add_bos=True)
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids]))[0, -1]
    top = torch.topk(logits, 5)
    greedy = generate(model, prompt_ids, args.n_expected)
    with torch.no_grad():
        all_logits = model(torch.tensor([prompt_ids + greedy]))[0]
    logits_end = all_logits[-1]
    # top1 - top2 margin at every greedy decision: how much numerical noise the
    # reproduction can tolerate before the argmax flips
    dec = all_logits[len(prompt_ids) - 1: len(prompt_ids) - 1 + len(greedy)]
    t2 = torch.topk(dec, 2, dim=-1).values
    margins = (t2[:, 0] - t2[:, 1]).tolist()
    if torch.argmax(dec, dim=-1).tolist() != greedy:
        print("warning: greedy path not reproduced by a single full forward pass")
    kmin = int(np.argmin(margins))
    top_end = torch.topk(logits_end, 5)
    lines = [
        "# greedy reference from the float32 PyTorch model (weights as stored in the GGUF)",
        "model: %s" % os.path.basename(args.out),
        "prompt: %s" % prompt,
        "prompt_ids: %s" % " ".join(map(str, prompt_ids)),
        "n_new: %d" % args.n_expected,
        "greedy_ids: %s" % " ".join(map(str, greedy)),
        "greedy_text: %s" % json.dumps(tok.decode(greedy, strip_leading_space=False)),
        "greedy_min_margin: %.6f (top1-top2 logit gap, at new token %d)" % (margins[kmin], kmin),
        "full_text: %s" % json.dumps(tok.decode(prompt_ids + greedy)),
        "# logits at the last prompt position (prediction of the first new token)",
        "top5_ids: %s" % " ".join(str(int(i)) for i in top.indices),
        "top5_logits: %s" % " ".join("%.6f" % float(v) for v in top.values),
        "logits_first8: %s" % " ".join("%.6f" % float(v) for v in logits[:8]),
        "# logits at the last position of prompt+greedy_ids (%d tokens)" % (len(prompt_ids) + len(greedy)),
        "final_top5_ids: %s" % " ".join(str(int(i)) for i in top_end.indices),
        "final_top5_logits: %s" % " ".join("%.6f" % float(v) for v in top_end.values),
    ]
    with open(base + ".expected.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(base + ".tokenizer-tests.txt", "w", encoding="utf-8") as f:
        f.write("# <JSON string>\\t<token ids, no BOS, space-separated> "
                "(llama SPM algorithm: dummy prefix, spaces -> U+2581, greedy by score, byte fallback)\n")
        for s in TOKENIZER_TESTS:
            ids = tok.encode(s)
            assert ids == encode_reference(tok, s), s
            assert tok.decode(ids) == s or s.startswith(" "), (s, tok.decode(ids))
            f.write("%s\t%s\n" % (json.dumps(s), " ".join(map(str, ids))))
    return prompt_ids, greedy


def parse_expected(path):
    d = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or ": " not in line:
                continue
            k, v = line.rstrip("\n").split(": ", 1)
            d[k] = v
    return d


def check(path, args):
    model, tok, cfg, kv, tensors, infos = load_from_gguf(path)
    print("gguf: %s  (%d bytes, %d tensors, %d kv)" % (path, os.path.getsize(path), len(tensors), len(kv)))
    for k in sorted(kv):
        v = kv[k]
        if isinstance(v, list):
            v = "[%d items] %s ..." % (len(v), v[:4])
        print("  %-45s %s" % (k, v))
    for name, (ne, gtype, off) in infos.items():
        print("  %-28s ne=%-14s %s off=%d" % (name, ne, {0: "f32", 1: "f16"}[gtype], off))
    ok = True
    # 1) weights round-trip against the checkpoint
    if os.path.exists(args.ckpt):
        ck = torch.load(args.ckpt, map_location="cpu")
        sd = ck["model"]
        f16 = kv.get("general.file_type", 0) == 1
        for gname, key in gguf_tensor_map(cfg):
            ref = sd[key].float().numpy()
            if f16 and ref.ndim == 2:
                ref = ref.astype(np.float16).astype(np.float32)
            if tensors[gname].shape != ref.shape or not np.array_equal(tensors[gname], ref):
                print("MISMATCH weights", gname)
                ok = False
        ok_tok = ck["tokens"] == tok.tokens and ck["scores"] == [float(np.float32(s)) for s in tok.scores]
        print("checkpoint round-trip:", "ok" if ok else "FAILED", "| tokenizer:", "ok" if ok_tok else "FAILED")
        ok = ok and ok_tok
    else:
        print("checkpoint %s not found: skipping weight comparison" % args.ckpt)
    # 2) expected outputs recomputed from the GGUF alone
    base = os.path.splitext(path)[0]
    if os.path.exists(base + ".expected.txt"):
        e = parse_expected(base + ".expected.txt")
        pids = tok.encode(e["prompt"], add_bos=True)
        good = " ".join(map(str, pids)) == e["prompt_ids"]
        g = generate(model, pids, int(e["n_new"]))
        good2 = " ".join(map(str, g)) == e["greedy_ids"]
        with torch.no_grad():
            top = torch.topk(model(torch.tensor([pids]))[0, -1], 5).indices.tolist()
        good3 = " ".join(map(str, top)) == e["top5_ids"]
        print("expected: prompt_ids %s, greedy_ids %s, top5 %s" % (good, good2, good3))
        ok = ok and good and good2 and good3
    if os.path.exists(base + ".tokenizer-tests.txt"):
        bad = 0
        with open(base + ".tokenizer-tests.txt", encoding="utf-8") as f:
            for line in f:
                if line.startswith("#"):
                    continue
                s, ids = line.rstrip("\n").split("\t")
                s = json.loads(s)
                want = [int(t) for t in ids.split()]
                if tok.encode(s) != want or encode_reference(tok, s) != want:
                    bad += 1
                    print("tokenizer mismatch:", repr(s))
        print("tokenizer tests:", "ok" if not bad else "%d FAILED" % bad)
        ok = ok and not bad
    print("CHECK", "PASSED" if ok else "FAILED")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/kjv-tiny.gguf")
    ap.add_argument("--name", default="kjv-tiny")
    ap.add_argument("--corpus", default=None, help="KJV text file (default: run `bible`)")
    ap.add_argument("--check", metavar="FILE", default=None)
    ap.add_argument("--ckpt", default="/tmp/kvgraph-train/ckpt.pt")
    ap.add_argument("--resume", action="store_true", help="continue from --ckpt")
    ap.add_argument("--resume-from", default=None, help="continue from this checkpoint file")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ff", type=int, default=384)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--rope-base", type=float, default=10000.0)
    ap.add_argument("--steps", type=int, default=2600)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--decay", type=int, default=300, help="final linear lr decay steps")
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--eval-windows", type=int, default=64)
    ap.add_argument("--f16", action="store_true", help="store 2-D weights as F16")
    ap.add_argument("--prompt", default="Blessed are the poor in spirit")
    ap.add_argument("--n-expected", type=int, default=48)
    ap.add_argument("--bench", type=int, default=0, help="time N training steps and exit")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    if args.check:
        sys.exit(0 if check(args.check, args) else 1)

    t_start = time.time()
    torch.manual_seed(args.seed)
    os.makedirs(os.path.dirname(os.path.abspath(args.ckpt)), exist_ok=True)

    verses = load_kjv(args.corpus)
    train_lines, val_lines = split_train_val(verses)
    print("corpus: %d verses (%d chars); train %d, val %d verses"
          % (len(verses), sum(map(len, verses)), len(train_lines), len(val_lines)))

    ck = None
    resume_path = args.resume_from or (args.ckpt if (args.resume or args.export_only) else None)
    if resume_path and os.path.exists(resume_path):
        ck = torch.load(resume_path, map_location="cpu")
        tok = Tokenizer(ck["tokens"], ck["scores"], ck["types"])
        cfg = ck["cfg"]
        print("loaded checkpoint %s at step %d" % (resume_path, ck["step"]))
    else:
        if args.export_only:
            sys.exit("no checkpoint at %s" % args.ckpt)
        t0 = time.time()
        tok = train_bpe("\n".join(train_lines), args.vocab)
        print("bpe trained in %.1fs" % (time.time() - t0))
        assert args.dim % args.heads == 0 and args.heads % args.kv_heads == 0
        cfg = dict(vocab=tok.n_vocab, dim=args.dim, n_layer=args.layers, n_head=args.heads,
                   n_kv_head=args.kv_heads, head_dim=args.dim // args.heads, ff=args.ff,
                   ctx=args.ctx, rope_base=args.rope_base, eps=1e-5)

    # sanity: the chunk-cached encoder agrees with the exact algorithm
    probe = "\n".join(train_lines[:40])
    assert tok.encode_fast(normalize(probe)) == tok.encode_normalized(normalize(probe))
    assert tok.encode(probe[:600]) == encode_reference(tok, probe[:600])

    t0 = time.time()
    train = LineData(tok, train_lines)
    val = LineData(tok, val_lines)
    print("tokens: train %d, val %d (%.2f chars/token), encoded in %.1fs"
          % (train.n_tokens, val.n_tokens, sum(map(len, train_lines)) / train.n_tokens, time.time() - t0))

    model = Llama(cfg)
    n_params = param_count(model)
    print("model: %s, %d parameters (%.2f MB as f32)" % (cfg, n_params, n_params * 4 / 1e6))

    ctx = cfg["ctx"]
    tr_max = max_start_line(train, ctx)
    eval_rng = np.random.default_rng(args.seed + 7)
    val_lines_eval = np.linspace(0, max_start_line(val, ctx) - 1, args.eval_windows).astype(int)
    tr_lines_eval = eval_rng.integers(0, tr_max, args.eval_windows)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    step = 0
    history = []
    train_time = 0.0
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step = ck["step"]
        history = ck.get("history", [])
        train_time = ck.get("train_time", 0.0)
        if args.export_only:
            args.steps = ck.get("steps", args.steps)

    def save_ckpt(path=None):
        path = path or args.ckpt
        tmp = path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "cfg": cfg, "tokens": tok.tokens, "scores": tok.scores, "types": tok.types,
                    "history": history, "train_time": train_time, "steps": args.steps,
                    "args": vars(args)}, tmp)
        os.replace(tmp, path)

    if args.bench:
        model.train()
        t0 = time.time()
        for i in range(args.bench):
            rng = np.random.default_rng([args.seed, i])
            x, y = train.batch(rng.integers(0, tr_max, args.batch), ctx)
            loss = F.cross_entropy(model(x).reshape(-1, cfg["vocab"]), y.reshape(-1), ignore_index=-1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        dt = (time.time() - t0) / args.bench
        print("bench: %.3fs/step, %.0f tokens/s, loss %.3f" % (dt, args.batch * ctx / dt, loss.item()))
        return

    model.train()
    t_seg = time.time()
    while step < args.steps and not args.export_only:
        rng = np.random.default_rng([args.seed, step])  # batch depends only on (seed, step)
        x, y = train.batch(rng.integers(0, tr_max, args.batch), ctx)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, args.warmup, args.decay)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), y.reshape(-1), ignore_index=-1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 20 == 0:
            now = time.time()
            print("step %5d  loss %.4f  lr %.2e  %.2fs/step" % (step, loss.item(), opt.param_groups[0]["lr"], (now - t_seg) / 20), flush=True)
            train_time += now - t_seg
            t_seg = now
        if step % args.eval_every == 0 or step == args.steps:
            tl = evaluate(model, train, tr_lines_eval, ctx)
            vl = evaluate(model, val, val_lines_eval, ctx)
            history.append((step, tl, vl))
            print("eval step %5d  train %.4f  val %.4f  (ppl %.1f / %.1f)" % (step, tl, vl, math.exp(tl), math.exp(vl)), flush=True)
            t_seg = time.time()
        if step % args.ckpt_every == 0 or step == args.steps:
            save_ckpt()
            if step <= args.steps - args.decay:
                # stable-phase snapshot: valid prefix of any run with more steps
                save_ckpt("%s.stable-%06d" % (args.ckpt, step))
                old = "%s.stable-%06d" % (args.ckpt, step - 5 * args.ckpt_every)
                if os.path.exists(old):
                    os.remove(old)
            t_seg = time.time()

    if not args.export_only:
        save_ckpt()
    model.eval()
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    size = export_gguf(args.out, model, tok, cfg, args.name, f16=args.f16)
    print("wrote %s (%d bytes)" % (args.out, size))

    # expected outputs are computed from the weights *as stored in the file*
    gmodel, gtok, _, _, _, _ = load_from_gguf(args.out)
    base = os.path.splitext(args.out)[0]
    prompt_ids, greedy = write_expected(gmodel, gtok, cfg, args, base)
    print("prompt_ids:", prompt_ids)
    print("greedy:", greedy)
    print("greedy text: %r" % gtok.decode(prompt_ids + greedy))

    gen = torch.Generator().manual_seed(args.seed)
    sample = generate(gmodel, prompt_ids, 160, temperature=0.8, gen=gen)
    print("sample (T=0.8): %r" % gtok.decode(prompt_ids + sample))
    if history:
        s, tl, vl = history[-1]
        print("final: step %d train loss %.4f val loss %.4f; params %d; train time %.0fs; total %.0fs"
              % (s, tl, vl, n_params, train_time, time.time() - t_start))


if __name__ == "__main__":
    main()
