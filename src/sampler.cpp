// The one-call sampler (Sampler, see sampler.h): penalties, greedy or top-k -> min-p ->
// temperature -> top-p -> draw, and its seeded RNG (splitmix64).
#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvg {

uint64_t Rng::next_u64() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double Rng::next_double() {
    // Top 53 bits: every value is exact in a double and < 1.
    return double(next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {}

void Sampler::accept(int token) {
    const int keep = params_.repeat_last_n;
    if (keep == 0) return;
    recent_.push_back(token);
    if (keep > 0 && (int)recent_.size() > keep) recent_.erase(recent_.begin(), recent_.end() - keep);
}

void Sampler::reset() {
    recent_.clear();
    rng_.seed(params_.seed);
}

const float* Sampler::penalized(const float* logits, int n) {
    const bool on = params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f;
    if (!on || recent_.empty()) return logits;
    pen_.assign(logits, logits + n);
    std::vector<int> ids(recent_);
    std::sort(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size();) {
        size_t j = i;
        while (j < ids.size() && ids[j] == ids[i]) ++j;
        const int id = ids[i], count = (int)(j - i);
        i = j;
        if (id < 0 || id >= n) continue;
        float& l = pen_[(size_t)id];
        l = l <= 0.0f ? l * params_.repeat_penalty : l / params_.repeat_penalty;
        l -= (float)count * params_.frequency_penalty + params_.presence_penalty;
    }
    return pen_.data();
}

int Sampler::argmax(const float* logits, int n) {
    if (!logits || n <= 0) return -1;
    int best = 0;
    float best_v = -std::numeric_limits<float>::infinity();
    bool found = false;
    for (int i = 0; i < n; i++) {
        const float v = logits[i];
        if (std::isnan(v)) continue;
        if (!found || v > best_v) {
            best = i;
            best_v = v;
            found = true;
        }
    }
    return best;
}

double Sampler::prepare(const float* logits, int n) {
    const float temp = params_.temp;
    if (!(temp > 0.0f)) return -1.0;  // also catches a NaN temperature

    const float ninf = -std::numeric_limits<float>::infinity();
    cand_.clear();
    cand_.reserve((size_t)n);
    float max_logit = ninf;
    for (int i = 0; i < n; i++) {
        const float l = std::isnan(logits[i]) ? ninf : logits[i];
        cand_.push_back({l, i, 0.0});
        max_logit = std::max(max_logit, l);
    }
    // Softmax is undefined here (inf - inf); the argmax is the sensible pick.
    if (std::isinf(max_logit)) return -1.0;

    // A strict total order, so partial_sort/sort results are unique.
    auto before = [](const Cand& a, const Cand& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    bool sorted = false;
    const int k = params_.top_k;
    if (k > 0 && k < n) {
        std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(), before);
        cand_.resize((size_t)k);
        sorted = true;
    }
    if (params_.min_p > 0.0f) { // p >= min_p * p_top  <=>  logit >= top logit + log(min_p)
        const double floor = (double)max_logit + std::log((double)std::min(params_.min_p, 1.0f));
        cand_.erase(std::remove_if(cand_.begin(), cand_.end(), [&](const Cand& c) { return (double)c.logit < floor; }),
                    cand_.end());
    }

    double sum = 0.0;
    for (Cand& c : cand_) {
        c.w = std::exp(((double)c.logit - (double)max_logit) / (double)temp);
        sum += c.w;
    }

    const float top_p = params_.top_p;
    if (!(top_p < 1.0f)) return sum;
    const double p = std::max(0.0, (double)top_p);

    if (!sorted) {
        drop_outside_nucleus(cand_, p, sum);
        std::sort(cand_.begin(), cand_.end(), before);
    }

    // Smallest prefix whose probability reaches p (at least one token).
    const size_t keep = nucleus_size(cand_, p * sum);
    cand_.resize(keep);
    sum = 0.0;
    for (const Cand& c : cand_) sum += c.w;
    return sum;
}

int Sampler::sample(const float* logits, int n_vocab) {
    if (!logits || n_vocab <= 0) return -1;
    logits = penalized(logits, n_vocab);
    const double sum = prepare(logits, n_vocab);
    if (sum < 0.0) return argmax(logits, n_vocab);

    const double r = rng_.next_double() * sum;
    double cum = 0.0;
    int last = cand_.front().id;  // the top token has weight 1, never 0
    for (const Cand& c : cand_) {
        if (c.w <= 0.0) continue;
        cum += c.w;
        last = c.id;
        if (r < cum) return c.id;
    }
    return last;  // r rounded up to sum
}

std::vector<TokenProb> Sampler::distribution(const float* logits, int n_vocab) {
    if (!logits || n_vocab <= 0) return {};
    logits = penalized(logits, n_vocab);
    const double sum = prepare(logits, n_vocab);
    if (sum < 0.0) return {{argmax(logits, n_vocab), 1.0f}};
    std::vector<TokenProb> out;
    out.reserve(cand_.size());
    for (const Cand& c : cand_) out.push_back({c.id, (float)(c.w / sum)});
    std::stable_sort(out.begin(), out.end(), [](const TokenProb& a, const TokenProb& b) {
        return a.p > b.p || (a.p == b.p && a.id < b.id);
    });
    return out;
}

}  // namespace kvg
