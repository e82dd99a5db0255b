// The kvg_sampler_* C API: every handle holds a chain or a single stage (sampler-chain.h);
// kvg_sampler_new's is the chain its params describe.
#include "kvgraph.h"

#include "sampler-chain.h"

#include <memory>
#include <vector>

// kvg_sampler_new's chain is sealed: kvgraph.h does not offer it as a chain (chain_add,
// chain_n and apply refuse it), so it stays the chain its params describe.
struct kvg_sampler {
    std::unique_ptr<kvg::SamplerStage> stage;
    bool sealed = false;
    std::vector<kvg_token_data> scratch;  // candidates for kvg_sampler_sample
};

// Wraps a stage made by kvg's make_*_stage or make_params_chain; NULL if out of memory.
template <typename Make> static kvg_sampler * new_stage(Make make) try {
    auto s = std::make_unique<kvg_sampler>();
    s->stage = make();
    return s.release();
} catch (...) { return nullptr; }

// ---- the params sampler ---------------------------------------------------------------------------------------------

kvg_sampler_params kvg_sampler_default_params(void) {
    kvg_sampler_params p;
    p.temp = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.seed = 0x6b7667ull;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.0f;
    return p;
}

kvg_sampler * kvg_sampler_new(kvg_sampler_params params) {
    kvg_sampler * s = new_stage([&] { return kvg::make_params_chain(params); });
    if (s) s->sealed = true;
    return s;
}

void kvg_sampler_free(kvg_sampler * sampler) { delete sampler; }

kvg_token kvg_sampler_sample(kvg_sampler * sampler, const float * logits, int32_t n_vocab) try {
    if (!sampler || !logits || n_vocab <= 0) return -1;
    const kvg_token t = kvg::sample_stage(*sampler->stage, logits, n_vocab, sampler->scratch);
    kvg_sampler_accept(sampler, t);
    return t;
} catch (...) {
    return -1;
}

void kvg_sampler_accept(kvg_sampler * sampler, kvg_token token) try {
    if (sampler) sampler->stage->accept(token);
} catch (...) {
}

void kvg_sampler_reset(kvg_sampler * sampler) {
    if (sampler) sampler->stage->reset();
}

kvg_token kvg_argmax(const float * logits, int32_t n_vocab) {
    return logits && n_vocab > 0 ? kvg::argmax(logits, n_vocab) : -1;
}

// ---- chains and stages ------------------------------------------------------------------------------------

static kvg::SamplerChain * as_chain(const kvg_sampler * s) {
    return s && !s->sealed ? dynamic_cast<kvg::SamplerChain *>(s->stage.get()) : nullptr;
}

kvg_sampler * kvg_sampler_chain_new(void) {
    return new_stage([] { return std::make_unique<kvg::SamplerChain>(); });
}

bool kvg_sampler_chain_add(kvg_sampler * chain, kvg_sampler * stage) try {
    kvg::SamplerChain * c = as_chain(chain);
    if (!c || !stage || stage->sealed || stage == chain) return false;
    c->add(std::move(stage->stage));  // push_back: a failure leaves stage->stage as it was
    delete stage;
    return true;
} catch (...) { return false; }
int32_t kvg_sampler_chain_n(const kvg_sampler * chain) {
    const kvg::SamplerChain * c = as_chain(chain);
    return c ? (int32_t) c->size() : -1;
}

kvg_sampler * kvg_sampler_init_greedy(void) { return new_stage(kvg::make_greedy_stage); }
kvg_sampler * kvg_sampler_init_dist(uint64_t seed) {
    return new_stage([=] { return kvg::make_dist_stage(seed); });
}
kvg_sampler * kvg_sampler_init_top_k(int32_t k) {
    return new_stage([=] { return kvg::make_top_k_stage(k); });
}
kvg_sampler * kvg_sampler_init_top_p(float p, size_t min_keep) {
    return new_stage([=] { return kvg::make_top_p_stage(p, min_keep); });
}
kvg_sampler * kvg_sampler_init_min_p(float p, size_t min_keep) {
    return new_stage([=] { return kvg::make_min_p_stage(p, min_keep); });
}
kvg_sampler * kvg_sampler_init_temp(float t) {
    return new_stage([=] { return kvg::make_temp_stage(t); });
}
kvg_sampler * kvg_sampler_init_penalties(int32_t last_n, float repeat, float freq, float present) {
    return new_stage([=] { return kvg::make_penalties_stage(last_n, repeat, freq, present); });
}

bool kvg_sampler_apply(kvg_sampler * sampler, kvg_token_data_array * cur_p) try {
    if (!sampler || sampler->sealed || !cur_p || (!cur_p->data && cur_p->size > 0)) return false;
    kvg::apply_stage(*sampler->stage, *cur_p);
    return true;
} catch (...) {
    return false;
}
