// The kvg_* C API: models, contexts (KV cache + reusable graphs + the decode loop),
// tokenizer and sampler wrappers.
#include "kvgraph.h"

#include "ggml-cpu.h"
#include "kv-cache.h"
#include "llama-graph.h"
#include "model.h"
#include "sampler.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

struct kvg_model {
    std::unique_ptr<kvg::Model> m;
};

struct kvg_sampler {
    kvg::Sampler s;
};

// Rows of KV cache a graph covers are rounded up to this, so that a generation of n
// tokens builds about n / KV_BUCKET graphs, not n.
static const int KV_BUCKET = 256;
// Graph shapes kept alive at once (least recently used is dropped).
static const size_t MAX_GRAPHS = 16;

struct kvg_context {
    const kvg::Model * model = nullptr;
    kvg_context_params params{};
    kvg::KvCache kv;

    struct cached_graph {
        std::unique_ptr<kvg::LlamaGraph> g;
        uint64_t last_use;
    };
    std::vector<cached_graph> graphs;
    uint64_t use_clock = 0;

    std::vector<uint8_t> work; // executor scratch, grown on demand
    std::vector<float> logits; // [n_logits, n_vocab]
    int n_logits = 0;
};

// The integer a C caller stored in an enum field: C allows any int there, while reading
// an out-of-range value through the C++ enum type would be undefined.
template <class E> static int enum_value(const E & e) {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

static void set_err(char * err, size_t err_size, const std::string & msg) {
    if (err && err_size > 0) {
        std::snprintf(err, err_size, "%s", msg.c_str());
    }
}

// ---- models ---------------------------------------------------------------------------------------------

kvg_model_params kvg_model_default_params(void) {
    kvg_model_params p;
    p.use_mmap = true;
    return p;
}

kvg_model * kvg_model_load(const char * path, const char * tokenizer_path, kvg_model_params params, char * err,
                           size_t err_size) {
    set_err(err, err_size, "");
    if (!path || !*path) {
        set_err(err, err_size, "no model path given");
        return nullptr;
    }
    kvg::LoadOptions opt;
    opt.use_mmap = params.use_mmap;
    std::string e;
    auto m = kvg::load_model(path, tokenizer_path ? tokenizer_path : "", opt, &e);
    if (!m) {
        set_err(err, err_size, e);
        return nullptr;
    }
    kvg_model * model = new kvg_model;
    model->m = std::move(m);
    return model;
}

void kvg_model_free(kvg_model * model) { delete model; }

bool kvg_model_save_gguf(const kvg_model * model, const char * path, kvg_ftype ftype, bool no_vocab, char * err,
                         size_t err_size) {
    set_err(err, err_size, "");
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
        default: set_err(err, err_size, "unknown output type"); return false;
    }
    std::string e;
    if (!kvg::save_gguf(*model->m, path, t, !no_vocab, &e)) {
        set_err(err, err_size, e);
        return false;
    }
    return true;
}

int32_t kvg_model_n_vocab(const kvg_model * model) { return model->m->hp.n_vocab; }
int32_t kvg_model_n_ctx_train(const kvg_model * model) { return model->m->hp.n_ctx_train; }
int32_t kvg_model_n_embd(const kvg_model * model) { return model->m->hp.n_embd; }
int32_t kvg_model_n_layer(const kvg_model * model) { return model->m->hp.n_layer; }
int32_t kvg_model_n_head(const kvg_model * model) { return model->m->hp.n_head; }
int32_t kvg_model_n_head_kv(const kvg_model * model) { return model->m->hp.n_head_kv; }
kvg_token kvg_model_bos(const kvg_model * model) { return model->m->bos; }
kvg_token kvg_model_eos(const kvg_model * model) { return model->m->eos; }
bool kvg_model_has_vocab(const kvg_model * model) { return model->m->has_vocab; }
size_t kvg_model_weight_bytes(const kvg_model * model) { return model->m->weight_bytes(); }
const char * kvg_model_desc(const kvg_model * model) { return model->m->desc.c_str(); }

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
    if (!model || !model->m->has_vocab) return INT32_MIN;
    const std::vector<int> ids = model->m->vocab.encode(text ? text : "", add_bos);
    const int32_t n = (int32_t) ids.size();
    if (!tokens || n > n_max) return -n;
    std::copy(ids.begin(), ids.end(), tokens);
    return n;
}

int32_t kvg_token_to_piece(const kvg_model * model, kvg_token prev, kvg_token token, char * buf, int32_t size) {
    if (!model || !model->m->has_vocab) return INT32_MIN;
    return copy_out(model->m->vocab.decode_next(prev, token), buf, size);
}

int32_t kvg_detokenize(const kvg_model * model, const kvg_token * tokens, int32_t n, char * buf, int32_t size) {
    if (!model || !model->m->has_vocab) return INT32_MIN;
    std::vector<int> ids(tokens, tokens + std::max(n, 0));
    return copy_out(model->m->vocab.decode(ids), buf, size);
}

// ---- contexts ---------------------------------------------------------------------------------------------

kvg_context_params kvg_context_default_params(void) {
    kvg_context_params p;
    p.n_ctx = 512;
    p.n_threads = 4;
    p.n_batch = 512;
    p.kv_type = KVG_KV_F32;
    p.attn = KVG_ATTN_FLASH;
    p.logits_all = false;
    return p;
}

kvg_context * kvg_context_new(const kvg_model * model, kvg_context_params params, char * err, size_t err_size) {
    set_err(err, err_size, "");
    if (!model) {
        set_err(err, err_size, "no model");
        return nullptr;
    }
    const kvg::HParams & hp = model->m->hp;
    if (params.n_ctx <= 0 || params.n_ctx > hp.n_ctx_train) {
        set_err(err, err_size, "n_ctx = " + std::to_string(params.n_ctx) + " is invalid: it must be in 1.." +
                                   std::to_string(hp.n_ctx_train) + " (the model's context length)");
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
    if (enum_value(params.kv_type) != KVG_KV_F32 && enum_value(params.kv_type) != KVG_KV_F16) {
        set_err(err, err_size, "unknown KV cache type " + std::to_string(enum_value(params.kv_type)));
        return nullptr;
    }
    if (enum_value(params.attn) != KVG_ATTN_FLASH && enum_value(params.attn) != KVG_ATTN_MATMUL) {
        set_err(err, err_size, "unknown attention implementation " + std::to_string(enum_value(params.attn)));
        return nullptr;
    }
    auto ctx = std::make_unique<kvg_context>();
    ctx->model = model->m.get();
    ctx->params = params;
    ctx->params.n_batch = std::min(params.n_batch, params.n_ctx);
    std::string e;
    if (!ctx->kv.init(hp, params.n_ctx, params.kv_type == KVG_KV_F16 ? GGML_TYPE_F16 : GGML_TYPE_F32, &e)) {
        set_err(err, err_size, e);
        return nullptr;
    }
    return ctx.release();
}

void kvg_context_free(kvg_context * ctx) { delete ctx; }

int32_t kvg_n_ctx(const kvg_context * ctx) { return ctx->params.n_ctx; }
size_t kvg_kv_cache_bytes(const kvg_context * ctx) { return ctx->kv.bytes(); }
int32_t kvg_n_past(const kvg_context * ctx) { return ctx->kv.n_past; }
void kvg_set_n_threads(kvg_context * ctx, int32_t n_threads) {
    if (n_threads > 0 && n_threads <= GGML_MAX_N_THREADS) ctx->params.n_threads = n_threads;
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

static bool compute(kvg_context * ctx, ggml_cgraph * gf, std::string * err) {
    ggml_cplan plan = ggml_graph_plan(gf, ctx->params.n_threads, nullptr);
    if (plan.work_size > ctx->work.size()) ctx->work.resize(plan.work_size);
    plan.work_data = plan.work_size ? ctx->work.data() : nullptr;
    const ggml_status st = ggml_graph_compute(gf, &plan);
    if (st != GGML_STATUS_SUCCESS) {
        *err = "graph computation failed (status " + std::to_string((int) st) + ")";
        return false;
    }
    return true;
}

const float * kvg_decode(kvg_context * ctx, const kvg_token * tokens, int32_t n, int32_t pos, char * err,
                         size_t err_size) {
    set_err(err, err_size, "");
    if (!ctx || !tokens || n <= 0) {
        set_err(err, err_size, "kvg_decode: no context or no tokens");
        return nullptr;
    }
    const int n_ctx = ctx->params.n_ctx, n_vocab = ctx->model->hp.n_vocab;
    if (pos < 0 || pos > ctx->kv.n_past) {
        set_err(err, err_size, "position " + std::to_string(pos) + " is invalid: the cache holds positions 0.." +
                                   std::to_string(ctx->kv.n_past - 1) + ", so the next one must be at most " +
                                   std::to_string(ctx->kv.n_past));
        return nullptr;
    }
    if ((int64_t) pos + n > n_ctx) {
        set_err(err, err_size, std::to_string(n) + " tokens at position " + std::to_string(pos) +
                                   " do not fit in the context of " + std::to_string(n_ctx) + " tokens");
        return nullptr;
    }
    for (int32_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            set_err(err, err_size, "token " + std::to_string(i) + " has id " + std::to_string(tokens[i]) +
                                       ", outside the vocabulary 0.." + std::to_string(n_vocab - 1));
            return nullptr;
        }
    }
    const bool all = ctx->params.logits_all;
    ctx->n_logits = all ? n : 1;
    ctx->logits.resize((size_t) ctx->n_logits * n_vocab);
    ctx->kv.n_past = pos; // rows from pos on are being replaced

    std::string e;
    for (int32_t done = 0; done < n;) {
        const int chunk = std::min(n - done, ctx->params.n_batch);
        const int p = pos + done;
        kvg::GraphShape shape;
        shape.n_tokens = chunk;
        shape.n_kv = std::min(n_ctx, GGML_PAD(p + chunk, KV_BUCKET));
        shape.logits_all = all;
        shape.flash_attn = ctx->params.attn == KVG_ATTN_FLASH;
        kvg::LlamaGraph * g = get_graph(ctx, shape, &e);
        if (!g) break;
        g->set_inputs(tokens + done, p, ctx->kv);
        if (!compute(ctx, g->gf, &e)) break;
        ctx->kv.n_past = p + chunk;
        const float * out = (const float *) g->logits->data;
        if (all) {
            std::memcpy(ctx->logits.data() + (size_t) done * n_vocab, out, sizeof(float) * chunk * n_vocab);
        } else if (done + chunk == n) {
            std::memcpy(ctx->logits.data(), out, sizeof(float) * n_vocab);
        }
        done += chunk;
    }
    if (!e.empty()) {
        set_err(err, err_size, e);
        ctx->n_logits = 0;
        return nullptr;
    }
    return ctx->logits.data() + (size_t) (ctx->n_logits - 1) * n_vocab;
}

const float * kvg_get_logits(kvg_context * ctx, int32_t i) {
    if (!ctx) return nullptr;
    if (i < 0) i += ctx->n_logits;
    if (i < 0 || i >= ctx->n_logits) return nullptr;
    return ctx->logits.data() + (size_t) i * ctx->model->hp.n_vocab;
}

// ---- sampling ---------------------------------------------------------------------------------------------

kvg_sampler_params kvg_sampler_default_params(void) {
    const kvg::SamplerParams d;
    kvg_sampler_params p;
    p.temp = d.temp;
    p.top_k = d.top_k;
    p.top_p = d.top_p;
    p.seed = d.seed;
    return p;
}

kvg_sampler * kvg_sampler_new(kvg_sampler_params params) {
    kvg::SamplerParams p;
    p.temp = params.temp;
    p.top_k = params.top_k;
    p.top_p = params.top_p;
    p.seed = params.seed;
    return new kvg_sampler{kvg::Sampler(p)};
}

void kvg_sampler_free(kvg_sampler * sampler) { delete sampler; }

kvg_token kvg_sampler_sample(kvg_sampler * sampler, const float * logits, int32_t n_vocab) {
    return sampler ? sampler->s.sample(logits, n_vocab) : -1;
}

kvg_token kvg_argmax(const float * logits, int32_t n_vocab) { return kvg::Sampler::argmax(logits, n_vocab); }
