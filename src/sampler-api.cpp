// The kvg_sampler_* C API: the one-call sampler (kvg::Sampler) and sampler chains / stages
// (sampler-chain.h) behind one handle type.
#include "kvgraph.h"

#include "sampler-chain.h"
#include "sampler.h"

#include <memory>
#include <vector>

// Exactly one of one_call (kvg_sampler_new) and stage (a chain or a single stage) is set.
struct kvg_sampler {
    std::unique_ptr<kvg::Sampler> one_call;
    std::unique_ptr<kvg::SamplerStage> stage;
    std::vector<kvg_token_data> scratch;  // candidates for kvg_sampler_sample
};

// ---- the one-call sampler ---------------------------------------------------------------------------------------------

// kvg_sampler_params and kvg::SamplerParams have the same field names.
template <typename From, typename To>
static void copy_params(const From & a, To & b) {
    b.temp = a.temp;
    b.top_k = a.top_k;
    b.top_p = a.top_p;
    b.seed = a.seed;
    b.min_p = a.min_p;
    b.repeat_penalty = a.repeat_penalty;
    b.repeat_last_n = a.repeat_last_n;
    b.frequency_penalty = a.frequency_penalty;
    b.presence_penalty = a.presence_penalty;
}

kvg_sampler_params kvg_sampler_default_params(void) {
    kvg_sampler_params p;
    copy_params(kvg::SamplerParams(), p);
    return p;
}

kvg_sampler * kvg_sampler_new(kvg_sampler_params params) try {
    kvg::SamplerParams p;
    copy_params(params, p);
    auto s = std::make_unique<kvg_sampler>();
    s->one_call = std::make_unique<kvg::Sampler>(p);
    return s.release();
} catch (...) {
    return nullptr;
}

void kvg_sampler_free(kvg_sampler * sampler) { delete sampler; }

kvg_token kvg_sampler_sample(kvg_sampler * sampler, const float * logits, int32_t n_vocab) try {
    if (!sampler || !logits || n_vocab <= 0) return -1;
    const kvg_token t = sampler->one_call ? sampler->one_call->sample(logits, n_vocab)
                                          : kvg::sample_stage(*sampler->stage, logits, n_vocab, sampler->scratch);
    kvg_sampler_accept(sampler, t);
    return t;
} catch (...) {
    return -1;
}

void kvg_sampler_accept(kvg_sampler * sampler, kvg_token token) try {
    if (!sampler) return;
    if (sampler->one_call) sampler->one_call->accept(token);
    else sampler->stage->accept(token);
} catch (...) {
}

void kvg_sampler_reset(kvg_sampler * sampler) {
    if (!sampler) return;
    if (sampler->one_call) sampler->one_call->reset();
    else sampler->stage->reset();
}

kvg_token kvg_argmax(const float * logits, int32_t n_vocab) { return logits && n_vocab > 0 ? kvg::Sampler::argmax(logits, n_vocab) : -1; }

// ---- chains and stages ------------------------------------------------------------------------------------

// Wraps a stage made by one of kvg's make_*_stage; NULL if out of memory.
template <typename Make>
static kvg_sampler * new_stage(Make make) try {
    auto s = std::make_unique<kvg_sampler>();
    s->stage = make();
    return s.release();
} catch (...) {
    return nullptr;
}

static kvg::SamplerChain * as_chain(const kvg_sampler * s) {
    return s ? dynamic_cast<kvg::SamplerChain *>(s->stage.get()) : nullptr;
}

kvg_sampler * kvg_sampler_chain_new(void) {
    return new_stage([] { return std::make_unique<kvg::SamplerChain>(); });
}

bool kvg_sampler_chain_add(kvg_sampler * chain, kvg_sampler * stage) try {
    kvg::SamplerChain * c = as_chain(chain);
    if (!c || !stage || !stage->stage || stage == chain) return false;
    c->add(std::move(stage->stage));  // push_back: a failure leaves stage->stage as it was
    delete stage;
    return true;
} catch (...) {
    return false;
}

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
    if (!sampler || !sampler->stage || !cur_p || (!cur_p->data && cur_p->size > 0)) return false;
    kvg::apply_stage(*sampler->stage, *cur_p);
    return true;
} catch (...) {
    return false;
}
