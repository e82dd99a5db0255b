// The kvg_* C API: models, contexts (KV cache + reusable graphs + the decode loop),
// tokenizer wrappers (the sampling ones are in sampler-api.cpp).
#include "api-impl.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

// Graph shapes kept alive at once (least recently used is dropped).
static const size_t MAX_GRAPHS = 16;
// Chunks of one shape that share a graph (they overlap where the edges allow).
static const size_t MAX_CHUNKS_PER_GRAPH = 4;
// Sequences per context.
static const int MAX_SEQ = 256;

using kvg::begin_call;
using kvg::set_err;
using kvg::set_exception_err;

// The integer a C caller stored in an enum field: C allows any int there, while reading
// an out-of-range value through the C++ enum type would be undefined.
template <class E> static int enum_value(const E & e) {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

namespace kvg {

static void write_err(char * err, size_t err_size, const std::string & msg) {
    if (err && err_size > 0) {
        std::snprintf(err, err_size, "%s", msg.c_str());
    }
}
void begin_call(char * err, size_t err_size) {
    write_err(err, err_size, "");
    start_status();
}
void set_err(char * err, size_t err_size, const std::string & msg, kvg_status kind) {
    write_err(err, err_size, msg);
    fail_status(kind);
}
void set_exception_err(char * err, size_t err_size, const char * fn) {
    try {
        throw;
    } catch (const std::bad_alloc &) {
        note_status(KVG_STATUS_OUT_OF_MEMORY);
        set_err(err, err_size, std::string(fn) + ": out of memory");
    } catch (const std::exception & e) {
        set_err(err, err_size, std::string(fn) + ": " + e.what());
    } catch (...) {
        set_err(err, err_size, std::string(fn) + ": unknown error");
    }
}

} // namespace kvg

// ---- models ---------------------------------------------------------------------------------------------

kvg_model_params kvg_model_default_params(void) {
    kvg_model_params p;
    p.use_mmap = true;
    p.max_weight_bytes = 0;
    p.check_tensors = false;
    p.vocab_only = false;
    p.repack = true;
    p.f16_as_bf16 = false;
    return p;
}

kvg_model * kvg_model_load(const char * path, const char * tokenizer_path, kvg_model_params params, char * err,
                           size_t err_size) try {
    begin_call(err, err_size);
    if (!path || !*path) {
        set_err(err, err_size, "no model path given");
        return nullptr;
    }
    kvg::LoadOptions opt;
    opt.use_mmap = params.use_mmap;
    opt.check_tensors = params.check_tensors;
    opt.vocab_only = params.vocab_only;
    opt.repack = params.repack;
    opt.f16_as_bf16 = params.f16_as_bf16;
    std::string e;
    auto m = kvg::load_model(path, tokenizer_path ? tokenizer_path : "", opt, &e);
    if (!m) {
        set_err(err, err_size, e, KVG_STATUS_BAD_FILE);
        return nullptr;
    }
    if (params.max_weight_bytes > 0 && m->weight_bytes() > params.max_weight_bytes) {
        set_err(err, err_size, std::string(path) + ": the model's weights need " + std::to_string(m->weight_bytes()) +
                                   " bytes, more than the limit of " + std::to_string(params.max_weight_bytes) + " bytes",
                KVG_STATUS_OUT_OF_MEMORY);
        return nullptr;
    }
    kvg_model * model = new kvg_model;
    model->m = std::move(m);
    return model;
} catch (...) {
    set_exception_err(err, err_size, "kvg_model_load");
    return nullptr;
}

void kvg_model_free(kvg_model * model) { delete model; }

bool kvg_model_save_gguf(const kvg_model * model, const char * path, kvg_ftype ftype, bool no_vocab, char * err,
                         size_t err_size) try {
    begin_call(err, err_size);
    if (!model || !path) {
        set_err(err, err_size, "no model or path");
        return false;
    }
    ggml_type t;
    switch (enum_value(ftype)) {
        case KVG_FTYPE_F32: t = GGML_TYPE_F32; break;
        case KVG_FTYPE_F16: t = GGML_TYPE_F16; break;
        case KVG_FTYPE_Q8_0: t = GGML_TYPE_Q8_0; break;
        case KVG_FTYPE_Q4_0: t = GGML_TYPE_Q4_0; break;
        case KVG_FTYPE_BF16: t = GGML_TYPE_BF16; break;
        case KVG_FTYPE_IQ4_XS: t = GGML_TYPE_IQ4_XS; break;
        case KVG_FTYPE_TQ1_0: t = GGML_TYPE_TQ1_0; break;
        case KVG_FTYPE_TQ2_0: t = GGML_TYPE_TQ2_0; break;
        default: set_err(err, err_size, "unknown output type"); return false;
    }
    std::string e;
    if (!kvg::save_gguf(*model->m, path, t, !no_vocab, &e)) {
        set_err(err, err_size, e, KVG_STATUS_IO);
        return false;
    }
    return true;
} catch (...) {
    set_exception_err(err, err_size, "kvg_model_save_gguf");
    return false;
}

// Accessors: a NULL model reads as 0 (-1 for bos/eos, false, "" for the description).
int32_t kvg_model_n_vocab(const kvg_model * model) { return model ? model->m->hp.n_vocab : 0; }
int32_t kvg_model_n_ctx_train(const kvg_model * model) { return model ? model->m->hp.n_ctx_train : 0; }
int32_t kvg_model_n_embd(const kvg_model * model) { return model ? model->m->hp.n_embd : 0; }
int32_t kvg_model_n_layer(const kvg_model * model) { return model ? model->m->hp.n_layer : 0; }
int32_t kvg_model_n_head(const kvg_model * model) { return model ? model->m->hp.n_head : 0; }
int32_t kvg_model_n_head_kv(const kvg_model * model) { return model ? model->m->hp.n_head_kv : 0; }
kvg_token kvg_model_bos(const kvg_model * model) { return model ? model->m->bos : -1; }
kvg_token kvg_model_eos(const kvg_model * model) { return model ? model->m->eos : -1; }
bool kvg_token_is_eog(const kvg_model * model, kvg_token token) {
    if (!model || token < 0 || token >= model->m->hp.n_vocab) return false;
    return token == model->m->eos || (model->m->has_vocab && model->m->vocab.is_end(token));
}
bool kvg_model_has_vocab(const kvg_model * model) { return model && model->m->has_vocab; }
size_t kvg_model_weight_bytes(const kvg_model * model) { return model ? model->m->weight_bytes() : 0; }
const char * kvg_model_desc(const kvg_model * model) { return model ? model->m->desc.c_str() : ""; }

// ---- tokenizer ------------------------------------------------------------------------------------------

// Copies s into buf following the "length or -length" convention.
static int32_t copy_out(const std::string & s, char * buf, int32_t size) {
    const int32_t n = (int32_t) std::min<size_t>(s.size(), INT32_MAX - 1);
    if (!buf || size <= n) return -n;
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
    return n;
}

int32_t kvg_tokenize(const kvg_model * model, const char * text, bool add_bos, kvg_token * tokens, int32_t n_max) {
    return kvg_tokenize_special(model, text, add_bos, false, tokens, n_max);
}

int32_t kvg_tokenize_special(const kvg_model * model, const char * text, bool add_bos, bool parse_special,
                             kvg_token * tokens, int32_t n_max) try {
    if (!model || !model->m->has_vocab) return INT32_MIN;
    const std::vector<int> ids = model->m->vocab.encode(text ? text : "", add_bos, parse_special);
    const int32_t n = (int32_t) ids.size();
    if (!tokens || n > n_max) return -n;
    std::copy(ids.begin(), ids.end(), tokens);
    return n;
} catch (...) { return INT32_MIN; }

int32_t kvg_token_to_piece(const kvg_model * model, kvg_token prev, kvg_token token, char * buf, int32_t size) try {
    if (!model || !model->m->has_vocab) return INT32_MIN;
    return copy_out(model->m->vocab.decode_next(prev, token), buf, size);
} catch (...) {
    return INT32_MIN;
}

int32_t kvg_detokenize(const kvg_model * model, const kvg_token * tokens, int32_t n, char * buf, int32_t size) try {
    if (!model || !model->m->has_vocab || n < 0 || (!tokens && n > 0)) return INT32_MIN;
    std::vector<int> ids(tokens, tokens + n);
    return copy_out(model->m->vocab.decode(ids), buf, size);
} catch (...) {
    return INT32_MIN;
}

// ---- contexts ---------------------------------------------------------------------------------------------

kvg_context_params kvg_context_default_params(void) {
    kvg_context_params p;
    p.n_ctx = 0;
    p.n_threads = 4;
    p.n_batch = 512;
    p.kv_type = KVG_KV_F32;
    p.attn = KVG_ATTN_FLASH;
    p.logits_all = false;
    p.n_seq_max = 1;
    p.kv_mode = KVG_KV_LINEAR;
    p.n_window = 0;
    p.n_sink = 0;
    p.kv_static = false;
    p.max_kv_bytes = 0;
    return p;
}

kvg_context * kvg_context_new(const kvg_model * model, kvg_context_params params, char * err, size_t err_size) try {
    begin_call(err, err_size);
    if (!model) {
        set_err(err, err_size, "no model");
        return nullptr;
    }
    const kvg::HParams & hp = model->m->hp;
    if (params.n_ctx == 0) params.n_ctx = hp.n_ctx_train; // llama.cpp's meaning
    if (params.n_ctx <= 0 || params.n_ctx > hp.n_ctx_train) {
        set_err(err, err_size, "n_ctx = " + std::to_string(params.n_ctx) + " is invalid: it must be in 1.." +
                                   std::to_string(hp.n_ctx_train) + " (the model's context length), or 0 for that length");
        return nullptr;
    }
    if (params.n_threads <= 0 || params.n_threads > GGML_MAX_N_THREADS) {
        set_err(err, err_size, "n_threads = " + std::to_string(params.n_threads) + " is invalid");
        return nullptr;
    }
    if (params.n_batch <= 0) {
        set_err(err, err_size, "n_batch = " + std::to_string(params.n_batch) + " is invalid");
        return nullptr;
    }
    if (params.n_seq_max <= 0 || params.n_seq_max > MAX_SEQ) {
        set_err(err, err_size, "n_seq_max = " + std::to_string(params.n_seq_max) + " is invalid: it must be in 1.." +
                                   std::to_string(MAX_SEQ));
        return nullptr;
    }
    const int kv_type = enum_value(params.kv_type);
    if (kv_type != KVG_KV_F32 && kv_type != KVG_KV_F16 && kv_type != KVG_KV_Q8_0) {
        set_err(err, err_size, "unknown KV cache type " + std::to_string(kv_type));
        return nullptr;
    }
    if (enum_value(params.attn) != KVG_ATTN_FLASH && enum_value(params.attn) != KVG_ATTN_MATMUL) {
        set_err(err, err_size, "unknown attention implementation " + std::to_string(enum_value(params.attn)));
        return nullptr;
    }
    if (enum_value(params.kv_mode) != KVG_KV_LINEAR && enum_value(params.kv_mode) != KVG_KV_RING) {
        set_err(err, err_size, "unknown KV cache mode " + std::to_string(enum_value(params.kv_mode)));
        return nullptr;
    }
    auto ctx = std::make_unique<kvg_context>();
    ctx->model = model->m.get();
    ctx->params = params;
    ctx->params.n_batch = std::min(params.n_batch, params.n_ctx);
    kvg::KvCacheParams kp;
    kp.n_ctx = params.n_ctx;
    kp.n_seq = params.n_seq_max;
    kp.type = kv_type == KVG_KV_F16 ? GGML_TYPE_F16 : kv_type == KVG_KV_Q8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F32;
    kp.mode = params.kv_mode == KVG_KV_RING ? kvg::KvMode::Ring : kvg::KvMode::Linear;
    kp.n_window = params.n_window;
    kp.n_sink = params.n_sink;
    kp.commit = params.kv_static;
    kp.max_bytes = params.max_kv_bytes;
    std::string e;
    if (!ctx->kv.init(hp, kp, &e)) {
        set_err(err, err_size, e);
        return nullptr;
    }
    return ctx.release();
} catch (...) {
    set_exception_err(err, err_size, "kvg_context_new");
    return nullptr;
}

void kvg_context_free(kvg_context * ctx) { delete ctx; }

int32_t kvg_n_ctx(const kvg_context * ctx) { return ctx ? ctx->params.n_ctx : 0; }
size_t kvg_kv_cache_bytes(const kvg_context * ctx) { return ctx ? ctx->kv.bytes() : 0; }
int32_t kvg_n_past(const kvg_context * ctx) { return kvg_seq_n_past(ctx, 0); }
int32_t kvg_seq_n_past(const kvg_context * ctx, int32_t seq) {
    if (!ctx || seq < 0 || seq >= ctx->kv.n_seq()) return -1;
    return (int32_t) std::min<int64_t>(ctx->kv.n_past(seq), INT32_MAX);
}
int32_t kvg_n_seq_max(const kvg_context * ctx) { return ctx ? ctx->kv.n_seq() : 0; }
void kvg_set_n_threads(kvg_context * ctx, int32_t n_threads) {
    if (ctx && n_threads > 0 && n_threads <= GGML_MAX_N_THREADS) ctx->params.n_threads = n_threads;
}

// The graph of a shape, built on first use.
static kvg::LlamaGraph * get_graph(kvg_context * ctx, const kvg::GraphShape & shape, std::string * err) {
    ++ctx->use_clock;
    for (auto & c : ctx->graphs) {
        if (c.g->shape == shape) {
            c.last_use = ctx->use_clock;
            return c.g.get();
        }
    }
    if (ctx->graphs.size() >= MAX_GRAPHS) {
        auto lru = std::min_element(ctx->graphs.begin(), ctx->graphs.end(),
                                    [](const auto & a, const auto & b) { return a.last_use < b.last_use; });
        ctx->graphs.erase(lru);
    }
    auto g = kvg::build_llama_graph(*ctx->model, ctx->kv, shape, err);
    if (!g) return nullptr;
    ctx->graphs.push_back({std::move(g), ctx->use_clock});
    return ctx->graphs.back().g.get();
}

// Plans g once per thread count and CPU path: decoding computes one graph per token, and the
// plan's work size only changes with those (the graph is fixed once built).
static ggml_cplan plan_graph(kvg_context * ctx, kvg::LlamaGraph * g) {
    const int n_threads = ctx->params.n_threads, path = (int) ggml_cpu_get_features();
    if (g->plan_path != path || g->plan_threads != n_threads) {
        g->plan = ggml_graph_plan(g->gf, n_threads, nullptr);
        g->plan_threads = n_threads;
        g->plan_path = path;
    }
    return g->plan;
}

static bool compute(kvg_context * ctx, kvg::LlamaGraph * g, std::string * err) {
    ggml_cplan plan = plan_graph(ctx, g);
    if (plan.work_size > ctx->work.size()) ctx->work.resize(plan.work_size);
    plan.work_data = plan.work_size ? ctx->work.data() : nullptr;
    const ggml_status st = ggml_graph_compute(g->gf, &plan);
    if (st != GGML_STATUS_SUCCESS) {
        *err = "graph computation failed (status " + std::to_string((int) st) + ")";
        return false;
    }
    return true;
}

// Checks a batch: ids, sequences, consecutive positions per sequence (whether the cache can
// take it is the cache's to say: KvCache::begin_batch).
static bool check_batch(kvg_context * ctx, const kvg_token * tokens, const int32_t * pos, const int32_t * seq,
                        int32_t n, std::string * e) {
    const int n_vocab = ctx->model->hp.n_vocab, n_seq = ctx->kv.n_seq();
    std::vector<int64_t> & next = ctx->scratch.next;
    next.assign(n_seq, -1);
    for (int32_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            *e = "token " + std::to_string(i) + " has id " + std::to_string(tokens[i]) + ", outside the vocabulary 0.." +
                 std::to_string(n_vocab - 1);
            return false;
        }
        if (seq[i] < 0 || seq[i] >= n_seq) {
            *e = "token " + std::to_string(i) + " belongs to sequence " + std::to_string(seq[i]) +
                 ", outside 0.." + std::to_string(n_seq - 1) + " (n_seq_max)";
            return false;
        }
        const int s = seq[i];
        if (next[s] >= 0 && pos[i] != next[s]) {
            *e = "token " + std::to_string(i) + " of sequence " + std::to_string(s) + " is at position " +
                 std::to_string(pos[i]) + ", expected " + std::to_string(next[s]) + " (consecutive positions)";
            return false;
        }
        if (pos[i] < 0 || pos[i] == INT32_MAX) {
            *e = "position " + std::to_string(pos[i]) + " is invalid";
            return false;
        }
        next[s] = pos[i] + 1;
    }
    return true;
}

// Which tokens get logits (each sequence's last, or all with logits_all) and their rows.
static void plan_outputs(kvg_context * ctx, const int32_t * seq, int32_t n) {
    Scratch & sc = ctx->scratch;
    sc.output.assign(n, 0);
    sc.seen.assign(ctx->kv.n_seq(), 0);
    for (int32_t i = n - 1; i >= 0; --i) {
        sc.output[i] = ctx->params.logits_all || !sc.seen[seq[i]];
        sc.seen[seq[i]] = 1;
    }
    ctx->logit_row.assign(n, -1);
    int n_out = 0;
    for (int32_t i = 0; i < n; ++i) {
        if (sc.output[i]) ctx->logit_row[i] = n_out++;
    }
    ctx->logits.resize((size_t) n_out * ctx->model->hp.n_vocab);
}

// Chunks of at most n_batch tokens in which no token writes a slot an earlier token of the
// same chunk still attends (ring); the chunks' vectors are reused from call to call.
static int split_chunks(kvg_context * ctx, const kvg_token * tokens, const int32_t * pos, const int32_t * seq, int32_t n) {
    Scratch & sc = ctx->scratch;
    const kvg::KvCache & kv = ctx->kv;
    int n_chunks = 0;
    sc.chunk_first.assign(kv.n_seq(), -1);
    for (int32_t i = 0; i < n; ++i) {
        const int s = seq[i];
        if (n_chunks == 0 || sc.chunks[n_chunks - 1].n() == ctx->params.n_batch ||
            (sc.chunk_first[s] >= 0 && pos[i] > kv.chunk_last(sc.chunk_first[s]))) {
            if ((int) sc.chunks.size() == n_chunks) sc.chunks.emplace_back(), sc.index.emplace_back();
            kvg::Ubatch & ub = sc.chunks[n_chunks];
            ub.tokens.clear(), ub.pos.clear(), ub.seq.clear(), ub.output.clear(), sc.index[n_chunks].clear();
            ++n_chunks;
            std::fill(sc.chunk_first.begin(), sc.chunk_first.end(), -1);
        }
        if (sc.chunk_first[s] < 0) sc.chunk_first[s] = pos[i];
        kvg::Ubatch & ub = sc.chunks[n_chunks - 1];
        ub.tokens.push_back(tokens[i]);
        ub.pos.push_back(pos[i]);
        ub.seq.push_back(s);
        ub.output.push_back(sc.output[i]);
        sc.index[n_chunks - 1].push_back(i);
    }
    return n_chunks;
}

// Runs chunks [c0, c1) in one graph and copies their logits out. Each chunk's tokens go into
// the cache just before its inputs are set; the graph's shape is shape, or (matmul attention,
// one chunk) the first chunk's once the cache holds its tokens.
static bool run_graph(kvg_context * ctx, kvg::GraphShape shape, size_t c0, size_t c1, std::string * e) {
    Scratch & sc = ctx->scratch;
    const bool flash = ctx->params.attn == KVG_ATTN_FLASH;
    kvg::LlamaGraph * g = nullptr;
    for (size_t c = c0; c < c1; ++c) {
        const kvg::Ubatch & ub = sc.chunks[c];
        for (int i = 0; i < ub.n(); ++i) ctx->kv.apply(ub.seq[i], ub.pos[i]);
        if (c == c0) {
            if (!flash) shape = kvg::ubatch_shape(ub, ctx->kv, false, false);
            shape.n_chunks = (int) (c1 - c0);
            if (!(g = get_graph(ctx, shape, e))) return false;
        }
        g->set_inputs((int) (c - c0), ub, ctx->kv);
    }
    if (!compute(ctx, g, e)) return false;
    const int n_vocab = ctx->model->hp.n_vocab;
    for (size_t c = c0; c < c1; ++c) {
        const ggml_tensor * out = g->chunks[c - c0].logits;
        int row = 0;
        for (int i = 0; i < sc.chunks[c].n(); ++i) {
            if (!sc.chunks[c].output[i]) continue;
            std::memcpy(ctx->logits.data() + (size_t) ctx->logit_row[sc.index[c][i]] * n_vocab,
                        (const float *) out->data + (size_t) row++ * n_vocab, sizeof(float) * n_vocab);
        }
    }
    return true;
}

// Runs the chunks, several per graph where their shapes allow.
static bool run_chunks(kvg_context * ctx, int n_chunks, std::string * e) {
    Scratch & sc = ctx->scratch;
    kvg::KvCache & kv = ctx->kv;
    const bool flash = ctx->params.attn == KVG_ATTN_FLASH;
    for (size_t c0 = 0; c0 < (size_t) n_chunks;) {
        // Padding-free shapes do not depend on the cache state: consecutive chunks of one
        // shape share a graph (bucketed shapes grow with the fill, so one chunk per graph).
        kvg::GraphShape shape;
        size_t c1 = c0 + 1;
        if (flash) {
            shape = kvg::ubatch_shape(sc.chunks[c0], kv, true, true);
            // grouped K: apply() may load a group's rows on the host, between graphs only
            while (c1 < (size_t) n_chunks && c1 - c0 < MAX_CHUNKS_PER_GRAPH && !kv.grouped() &&
                   kvg::ubatch_shape(sc.chunks[c1], kv, true, true) == shape) {
                ++c1;
            }
        }
        if (!run_graph(ctx, shape, c0, c1, e)) return false;
        c0 = c1;
    }
    return true;
}

static bool decode(kvg_context * ctx, const kvg_token * tokens, const int32_t * pos, const int32_t * seq, int32_t n,
                   std::string * e) {
    ctx->n_batch_tokens = 0;
    if (!tokens || !pos || !seq || n <= 0) {
        *e = "no tokens";
        return false;
    }
    if (!check_batch(ctx, tokens, pos, seq, n, e)) return false;
    kvg::KvCache::Batch & batch = ctx->scratch.batch;
    if (!ctx->kv.begin_batch(pos, seq, n, &batch, e)) return false;
    plan_outputs(ctx, seq, n);
    const int n_chunks = split_chunks(ctx, tokens, pos, seq, n);
    if (!run_chunks(ctx, n_chunks, e)) {
        ctx->kv.rollback_batch(&batch); // positions from the batch's first on are forgotten
        return false;
    }
    ctx->kv.commit_batch(&batch);
    ctx->n_batch_tokens = n;
    return true;
}

const float * kvg_decode(kvg_context * ctx, const kvg_token * tokens, int32_t n, int32_t pos, char * err,
                         size_t err_size) try {
    begin_call(err, err_size);
    if (!ctx || !tokens || n <= 0) {
        set_err(err, err_size, "kvg_decode: no context or no tokens");
        return nullptr;
    }
    if (pos < 0 || (int64_t) pos + n - 1 > INT32_MAX) {
        set_err(err, err_size, "position " + std::to_string(pos) + " is invalid");
        return nullptr;
    }
    std::vector<int32_t> & p = ctx->scratch.pos;
    std::vector<int32_t> & s = ctx->scratch.seq;
    p.resize((size_t) n);
    s.assign((size_t) n, 0);
    for (int32_t i = 0; i < n; ++i) p[i] = pos + i;
    std::string e;
    if (!decode(ctx, tokens, p.data(), s.data(), n, &e)) {
        set_err(err, err_size, e);
        return nullptr;
    }
    return kvg_get_logits(ctx, n - 1);
} catch (...) {
    set_exception_err(err, err_size, "kvg_decode");
    return nullptr;
}

bool kvg_decode_batch(kvg_context * ctx, const kvg_token * tokens, const int32_t * pos, const int32_t * seq_ids,
                      int32_t n, char * err, size_t err_size) try {
    begin_call(err, err_size);
    if (!ctx) {
        set_err(err, err_size, "kvg_decode_batch: no context");
        return false;
    }
    std::string e;
    if (!decode(ctx, tokens, pos, seq_ids, n, &e)) {
        set_err(err, err_size, "kvg_decode_batch: " + e);
        return false;
    }
    return true;
} catch (...) {
    set_exception_err(err, err_size, "kvg_decode_batch");
    return false;
}

const float * kvg_get_logits(kvg_context * ctx, int32_t i) {
    if (!ctx) return nullptr;
    if (i < 0) i += ctx->n_batch_tokens;
    if (i < 0 || i >= ctx->n_batch_tokens || ctx->logit_row[i] < 0) return nullptr;
    return ctx->logits.data() + (size_t) ctx->logit_row[i] * ctx->model->hp.n_vocab;
}
