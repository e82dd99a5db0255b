// Token sampling, the one implementation behind every kvg_sampler: a chain in the style of
// llama.cpp's, whose stages (penalties, top-k, min-p, temperature, top-p, greedy, dist) each
// narrow or rescore an array of candidates in turn, and greedy or dist picks one of them.
// kvg_sampler_new is the chain make_params_chain builds.
//
// Results depend only on the logits, the stages and the seed: the RNG is spelled out here
// (splitmix64) and candidate order is a total order (logit descending, id ascending), so no
// library- or platform-defined behaviour enters except the last bits of exp().
#pragma once

#include "kvgraph.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kvg {

// splitmix64 (Steele, Lea, Flood 2014): tiny, full-period over 2^64 states,
// good enough statistically for sampling, and identical on every platform.
class Rng {
public:
    explicit Rng(uint64_t seed = 0) : state_(seed) {}
    void seed(uint64_t s) { state_ = s; }
    uint64_t next_u64();
    double next_double(); // uniform in [0, 1), 53 random bits

private:
    uint64_t state_;
};

// The array a stage works on, plus the temperature the stages so far asked for but that is not
// yet divided into the logits: later stages fold it into their probabilities in double, so
// rounding the scaled logits to float does not shift the draws.
struct Candidates {
    kvg_token_data_array & a;
    double temp = 1.0;
    // Divides the logits by temp and sets temp to 1 (before anything that adds to logits).
    void fold_temp();
};

class SamplerStage {
public:
    // What apply does to candidates in id order, when that is known without them: nothing
    // (keeps), or select best_candidate (picks_best). Lets sample_stage skip building them.
    enum class Effect { keeps, picks_best, other };
    virtual ~SamplerStage() = default;
    virtual void apply(Candidates & c) = 0;
    virtual Effect effect() const { return Effect::other; }
    virtual void accept(int /*token*/) {}
    virtual void reset() {}
};

class SamplerChain : public SamplerStage {
public:
    // Takes stage; if this throws (out of memory), stage is left as it was.
    void add(std::unique_ptr<SamplerStage> && stage) { stages_.push_back(std::move(stage)); }
    size_t size() const { return stages_.size(); }
    void apply(Candidates & c) override;
    Effect effect() const override;
    void accept(int token) override;
    void reset() override;

private:
    std::vector<std::unique_ptr<SamplerStage>> stages_;
};

std::unique_ptr<SamplerStage> make_greedy_stage();
std::unique_ptr<SamplerStage> make_dist_stage(uint64_t seed);
std::unique_ptr<SamplerStage> make_top_k_stage(int k);
std::unique_ptr<SamplerStage> make_top_p_stage(float p, size_t min_keep);
std::unique_ptr<SamplerStage> make_min_p_stage(float p, size_t min_keep);
std::unique_ptr<SamplerStage> make_temp_stage(float t);
std::unique_ptr<SamplerStage> make_penalties_stage(int last_n, float repeat, float freq, float present);

// kvg_sampler_new's chain (its params documented in kvgraph.h): penalties, then greedy when
// temp <= 0 (or NaN), else top-k, min-p, temp, top-p and dist(seed), min_keep 1.
std::unique_ptr<SamplerChain> make_params_chain(const kvg_sampler_params & p);

// Index of the largest of logits[0..n), lowest index on ties, NaN skipped; 0 if all are NaN.
// n must be > 0.
int argmax(const float * logits, int n);

// Index of the best candidate: highest logit, NaN below everything, lowest id on ties.
// a.size must be > 0.
size_t best_candidate(const kvg_token_data_array & a);

// Runs stage on a (selected reset to -1 first) and writes the pending temperature into the logits.
void apply_stage(SamplerStage & stage, kvg_token_data_array & a);

// Runs stage on logits[0..n) as candidates in id order and returns the selected token, or the
// best candidate left when no stage selected one (a greedy fallback). Does not accept it.
// -1 if logits is null or n <= 0. scratch is reused across calls.
int sample_stage(SamplerStage & stage, const float * logits, int n, std::vector<kvg_token_data> & scratch);

}  // namespace kvg
