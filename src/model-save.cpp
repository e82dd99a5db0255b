// Writing a model as a GGUF file (llama architecture, llama.cpp's key and tensor names),
// with the weights converted to one type and the vocabulary (or a placeholder) included.
#include "model.h"
#include "model-impl.h"
#include "status.h"

#include "ggml-cpu.h"
#include "gguf.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace kvg {

static void set_vocab(gguf_context * g, const Model & m, bool placeholder) {
    std::vector<std::string> pieces;
    std::vector<float> scores;
    std::vector<int32_t> types;
    int bos = m.bos, eos = m.eos, unk = 0;
    if (m.has_vocab) {
        for (int i = 0; i < m.vocab.n_tokens(); ++i) {
            pieces.push_back(m.vocab.piece(i));
            scores.push_back(m.vocab.score(i));
            types.push_back(m.vocab.type(i));
        }
        bos = m.vocab.bos();
        eos = m.vocab.eos();
        unk = m.vocab.unk();
    } else if (placeholder) {
        // no tokenizer known: control tokens, byte tokens, then pieces that print their id
        for (int i = 0; i < m.hp.n_vocab; ++i) {
            if (i == 0) pieces.push_back("<unk>"), types.push_back(TOKEN_TYPE_UNKNOWN);
            else if (i == 1) pieces.push_back("<s>"), types.push_back(TOKEN_TYPE_CONTROL);
            else if (i == 2) pieces.push_back("</s>"), types.push_back(TOKEN_TYPE_CONTROL);
            else if (i < 3 + 256) pieces.push_back(strfmt("<0x%02X>", i - 3)), types.push_back(TOKEN_TYPE_BYTE);
            else pieces.push_back(strfmt("[%d]", i)), types.push_back(TOKEN_TYPE_NORMAL);
            scores.push_back(0.0f);
        }
        bos = 1, eos = 2, unk = 0;
    } else {
        return;
    }
    std::vector<const char *> ptrs;
    for (const std::string & p : pieces) ptrs.push_back(p.c_str());
    gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
    gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    if (bos >= 0) gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", (uint32_t) bos);
    if (eos >= 0) gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", (uint32_t) eos);
    if (unk >= 0) gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", (uint32_t) unk);
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", true);
    gguf_set_val_bool(g, "tokenizer.ggml.add_eos_token", false);
}

// Writes a temporary file beside the target and renames it over the target: a model that
// maps the old file keeps its pages (the old inode lives until it is unmapped), and a
// failed write leaves the old file as it was.
static bool write_replacing(gguf_context * g, const std::string & path, std::string * err) {
    std::string tmp = path + ".tmp-XXXXXX";
    const int fd = mkstemp(&tmp[0]);
    if (fd < 0) return fail(err, KVG_STATUS_IO, strfmt("cannot create a temporary file beside '%s': %s", path.c_str(), std::strerror(errno)));
    const mode_t mask = umask(0);
    umask(mask);
    const bool mode_ok = fchmod(fd, 0666 & ~mask) == 0; // mkstemp makes it 0600
    close(fd);
    if (!mode_ok || !gguf_write_to_file(g, tmp.c_str(), false)) {
        unlink(tmp.c_str());
        return fail(err, KVG_STATUS_IO, strfmt("failed to write '%s' (through '%s'); '%s' is unchanged", path.c_str(), tmp.c_str(), path.c_str()));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        unlink(tmp.c_str());
        return fail(err, KVG_STATUS_IO, strfmt("cannot replace '%s': %s; it is unchanged", path.c_str(), std::strerror(e)));
    }
    return true;
}

bool save_gguf(const Model & m, const std::string & path, ggml_type type, bool placeholder_vocab, std::string * err) {
    const bool ternary = type == GGML_TYPE_TQ1_0 || type == GGML_TYPE_TQ2_0;
    if (type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16 && type != GGML_TYPE_Q8_0 &&
        type != GGML_TYPE_Q4_0 && type != GGML_TYPE_IQ4_XS && !ternary) {
        return fail(err, KVG_STATUS_UNSUPPORTED,
                    strfmt("cannot write weights as %s (f32, f16, bf16, q8_0, q4_0, iq4_xs, tq1_0, tq2_0)",
                           ggml_type_name(type)));
    }
    if (m.arch != "llama") { // the writer knows llama's keys and tensors only
        return fail(err, KVG_STATUS_UNSUPPORTED, strfmt("cannot write a '%s' model (only 'llama')", m.arch.c_str()));
    }
    const HParams & hp = m.hp;
    gguf_context * g = gguf_init_empty();
    struct guard { gguf_context * g; ggml_context * c; ~guard() { gguf_free(g); if (c) ggml_free(c); } } gd{g, nullptr};

    gguf_set_val_str(g, "general.architecture", "llama");
    gguf_set_val_str(g, "general.name", "kvgraph-converted");
    // llama.cpp's file types: all f32, mostly f16, q4_0, q8_0, bf16, iq4_xs, tq1_0, tq2_0
    const uint32_t ftype = type == GGML_TYPE_F32      ? 0
                           : type == GGML_TYPE_F16    ? 1
                           : type == GGML_TYPE_Q4_0   ? 2
                           : type == GGML_TYPE_BF16   ? 32
                           : type == GGML_TYPE_IQ4_XS ? 30
                           : type == GGML_TYPE_TQ1_0  ? 36
                           : type == GGML_TYPE_TQ2_0  ? 37
                                                      : 7;
    gguf_set_val_u32(g, "general.file_type", ftype);
    gguf_set_val_u32(g, "llama.context_length", hp.n_ctx_train);
    gguf_set_val_u32(g, "llama.embedding_length", hp.n_embd);
    gguf_set_val_u32(g, "llama.block_count", hp.n_layer);
    gguf_set_val_u32(g, "llama.feed_forward_length", hp.n_ff);
    gguf_set_val_u32(g, "llama.attention.head_count", hp.n_head);
    gguf_set_val_u32(g, "llama.attention.head_count_kv", hp.n_head_kv);
    gguf_set_val_u32(g, "llama.rope.dimension_count", hp.n_rot);
    gguf_set_val_f32(g, "llama.rope.freq_base", hp.rope_base);
    if (hp.rope_yarn || hp.rope_freq_scale != 1.0f || hp.rope_attn_factor != 1.0f) {
        gguf_set_val_str(g, "llama.rope.scaling.type", hp.rope_yarn ? "yarn" : "linear");
        gguf_set_val_f32(g, "llama.rope.scaling.factor", 1.0f / hp.rope_freq_scale);
        gguf_set_val_f32(g, "llama.rope.scaling.attn_factor", hp.rope_attn_factor);
        gguf_set_val_u32(g, "llama.rope.scaling.original_context_length", hp.rope_ctx_orig());
    }
    gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", hp.rms_eps);
    gguf_set_val_u32(g, "llama.vocab_size", hp.n_vocab);
    set_vocab(g, m, placeholder_vocab);

    // Weights in llama.cpp's names. Q/K rows are written as they are: llama.cpp's HF
    // converter permutes them because HF checkpoints store rotate-half (NeoX) order, but
    // llama2.c / Meta weights already pair adjacent elements, the order ggml's rope mode 0
    // (llama.cpp's "normal" mode for the llama architecture) expects.
    const std::vector<ggml_tensor *> src = m.tensors();
    gd.c = new_meta_ctx(src.size());
    std::vector<std::vector<uint8_t>> bufs;
    bufs.reserve(src.size());
    for (const ggml_tensor * s : src) {
        ggml_type t = s->ne[1] == 1 ? GGML_TYPE_F32 : type;
        // as llama-quantize's IQ4_XS: the output matrix (or the tied embeddings) in q6_K, rows
        // not a multiple of 256 in iq4_nl
        if (t == GGML_TYPE_IQ4_XS && s == m.output) t = GGML_TYPE_Q6_K;
        if (t == GGML_TYPE_IQ4_XS && s->ne[0] % QK_K != 0) t = GGML_TYPE_IQ4_NL;
        // as llama-quantize's TQ1_0 / TQ2_0: embeddings in q4_K, the output in q6_K (tied: q6_K)
        if (ternary && s == m.output) t = GGML_TYPE_Q6_K;
        else if (ternary && s == m.tok_embd) t = GGML_TYPE_Q4_K;
        if (s->ne[0] % QK_K != 0) { // llama-quantize's fallbacks for rows that do not fill 256 values
            if (t == GGML_TYPE_Q4_K) t = GGML_TYPE_Q5_0;
            else if (t == GGML_TYPE_Q6_K) t = GGML_TYPE_Q8_0;
            else if (t == GGML_TYPE_TQ1_0 || t == GGML_TYPE_TQ2_0) t = GGML_TYPE_Q4_0;
        }
        if (ggml_is_quantized(t) && s->ne[0] % ggml_blck_size(t) != 0) t = GGML_TYPE_F16;
        ggml_tensor * d = ggml_new_tensor_2d(gd.c, t, s->ne[0], s->ne[1]);
        ggml_set_name(d, s->name);
        bufs.emplace_back(ggml_nbytes(d));
        d->data = bufs.back().data();
        std::vector<float> row(s->ne[0]);
        // interleaved rows (kvgraph's types past ggml's, repacked at load) are read from an unpacked copy
        ggml_tensor plain;
        std::vector<uint8_t> plain_bytes;
        if (s->type >= GGML_TYPE_COUNT) {
            plain = *s;
            plain_bytes.assign((const uint8_t *) s->data, (const uint8_t *) s->data + ggml_nbytes(s));
            plain.data = plain_bytes.data();
            if (!ggml_kvg_unrepack(&plain)) return fail(err, strfmt("cannot unpack '%s' (%s)", s->name, ggml_type_name(s->type)));
            s = &plain;
        }
        const ggml_type_traits * from = ggml_get_type_traits(s->type);
        const ggml_type_traits * to = ggml_get_type_traits(t);
        for (int64_t i = 0; i < s->ne[1]; ++i) {
            const char * srow = (const char *) s->data + i * s->nb[1];
            if (s->type == GGML_TYPE_F32) std::memcpy(row.data(), srow, row.size() * sizeof(float)); // no f32 to_float (as ggml)
            else from->to_float(srow, row.data(), s->ne[0]);
            to->from_float_ref(row.data(), (char *) d->data + i * d->nb[1], s->ne[0]);
        }
        gguf_add_tensor(g, d);
    }
    return write_replacing(g, path, err);
}

} // namespace kvg
