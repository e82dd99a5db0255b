// Token sampling: penalties on the recent tokens, then greedy, or top-k -> min-p ->
// temperature softmax -> top-p -> draw.
//
// Results depend only on the logits, the params and the seed: the RNG is
// spelled out here (splitmix64) and candidate order is a total order (logit
// descending, id ascending), so no library- or platform-defined behaviour
// enters except the last bits of exp().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvg {

// splitmix64 (Steele, Lea, Flood 2014): tiny, full-period over 2^64 states,
// good enough statistically for sampling, and identical on every platform.
class Rng {
public:
    explicit Rng(uint64_t seed = 0) : state_(seed) {}
    void seed(uint64_t s) { state_ = s; }
    uint64_t next_u64();
    double next_double();  // uniform in [0, 1), 53 random bits

private:
    uint64_t state_;
};

// Top-p helpers shared by Sampler and the chain's top-p stage; T has a double w, the
// candidate's unnormalised probability, and sum is their total.
//
// Drops candidates that cannot be in the nucleus of probability p, so fewer need sorting:
// those below (1-p)/(m-1) of the total sum to less than 1-p, so the nucleus is complete
// before any of them. Halving the cutoff leaves room for rounding.
template <typename T>
void drop_outside_nucleus(std::vector<T> & c, double p, double sum) {
    const size_t m = c.size();
    if (m <= 1) return;
    const double cutoff = 0.5 * (1.0 - p) / (double) (m - 1) * sum;
    c.erase(std::remove_if(c.begin(), c.end(), [&](const T & x) { return x.w < cutoff; }), c.end());
}

// Length of the smallest prefix of c (most likely first) whose weight reaches target; all of c
// if none does.
template <typename T>
size_t nucleus_size(const std::vector<T> & c, double target) {
    double cum = 0.0;
    for (size_t i = 0; i < c.size(); i++) {
        cum += c[i].w;
        if (cum >= target) return i + 1;
    }
    return c.size();
}

struct SamplerParams {
    float temp = 0.8f;   // <= 0: greedy
    int top_k = 40;      // <= 0 or >= n_vocab: disabled
    float top_p = 0.95f; // >= 1: disabled; <= 0 keeps only the top token
    float min_p = 0.0f;  // <= 0: disabled; keeps tokens whose probability is >= min_p x the top one's
    // llama.cpp's penalties over the last repeat_last_n accepted tokens: a token seen there
    // has its logit divided by repeat_penalty (multiplied if negative), then lowered by
    // frequency_penalty x its count and presence_penalty once.
    float repeat_penalty = 1.0f; // 1: off
    int repeat_last_n = 64;      // 0: off, -1: every accepted token
    float frequency_penalty = 0.0f;
    float presence_penalty = 0.0f;
    uint64_t seed = 0x6b7667ull;
};

struct TokenProb {
    int id;
    float p;
};

class Sampler {
public:
    explicit Sampler(const SamplerParams& params = SamplerParams());

    // Picks a token id from logits[0..n_vocab). Returns -1 if logits is null
    // or n_vocab <= 0. NaN logits count as -inf. If every logit is -inf/NaN,
    // or some logit is +inf, the result is greedy. Uses exactly one RNG draw
    // unless the choice is greedy (then none).
    int sample(const float* logits, int n_vocab);

    // The distribution sample() draws from (after top-k, temperature, top-p),
    // renormalised, most likely first (ties: lower id first). Greedy gives the
    // argmax with p = 1. Empty if logits is null or n_vocab <= 0.
    std::vector<TokenProb> distribution(const float* logits, int n_vocab);

    void reseed(uint64_t seed) { rng_.seed(seed); }
    // A token that joined the text (sampled, or from the prompt): what the penalties see.
    void accept(int token);
    // Forgets the accepted tokens and restarts the RNG from the params' seed.
    void reset();
    const SamplerParams& params() const { return params_; }

    // Index of the largest logit, lowest index on ties, NaN skipped; 0 if all
    // are NaN; -1 if logits is null or n <= 0.
    static int argmax(const float* logits, int n);

private:
    struct Cand {
        float logit;
        int id;
        double w;  // unnormalised probability
    };
    // Fills cand_ with the kept candidates and their weights; returns their
    // total weight, or a negative value when the choice is greedy.
    double prepare(const float* logits, int n_vocab);
    // logits with the penalties applied (a copy in pen_), or logits itself when none apply.
    const float* penalized(const float* logits, int n_vocab);

    SamplerParams params_;
    Rng rng_;
    std::vector<Cand> cand_;  // scratch reused across calls
    std::vector<int> recent_; // accepted tokens, oldest first, at most repeat_last_n
    std::vector<float> pen_;  // scratch: penalized logits
};

}  // namespace kvg
