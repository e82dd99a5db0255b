// The sampler chain's stages (penalties, top-k, min-p, temperature, top-p, greedy, dist), the
// chain that runs them over a candidate array, kvg_sampler_new's chain and the RNG (see
// sampler-chain.h).
#include "sampler-chain.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

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

namespace {

// The candidate total order: logit descending, NaN after everything, id ascending on ties.
bool before(const kvg_token_data & a, const kvg_token_data & b) {
    const bool an = std::isnan(a.logit), bn = std::isnan(b.logit);
    if (an != bn) return bn;
    if (!an && a.logit != b.logit) return a.logit > b.logit;
    return a.id < b.id;
}

// Unnormalised probability at temperature temp (NaN counts as -inf).
double weight(float logit, float max_logit, double temp) {
    if (std::isnan(logit)) return 0.0;
    return std::exp(((double) logit - (double) max_logit) / temp);
}

class Greedy : public SamplerStage {
public:
    void apply(Candidates & c) override {
        if (c.a.size > 0) c.a.selected = (int64_t) best_candidate(c.a);
    }
    Effect effect() const override { return Effect::picks_best; }
};

class Dist : public SamplerStage {
public:
    explicit Dist(uint64_t seed) : seed_(seed), rng_(seed) {}
    void reset() override { rng_.seed(seed_); }

    void apply(Candidates & c) override {
        kvg_token_data_array & a = c.a;
        if (a.size == 0) return;
        const size_t top = best_candidate(a);
        const float max_logit = a.data[top].logit;
        // inf - inf leaves the softmax undefined: take the best without a draw.
        if (!std::isfinite(max_logit)) {
            a.selected = (int64_t) top;
            return;
        }
        w_.resize(a.size);
        double sum = 0.0;
        for (size_t i = 0; i < a.size; i++) {
            w_[i] = weight(a.data[i].logit, max_logit, c.temp);
            sum += w_[i];
        }
        for (size_t i = 0; i < a.size; i++) a.data[i].p = (float) (w_[i] / sum);
        // Inverse CDF in array order: id order, or most likely first once a stage sorted.
        const double r = rng_.next_double() * sum;
        double cum = 0.0;
        size_t pick = top;
        for (size_t i = 0; i < a.size; i++) {
            if (w_[i] <= 0.0) continue;
            cum += w_[i];
            pick = i;
            if (r < cum) break;
        }
        a.selected = (int64_t) pick;  // the last positive one if r rounded up to sum
    }

private:
    uint64_t seed_;
    Rng rng_;
    std::vector<double> w_;  // scratch
};

class TopK : public SamplerStage {
public:
    explicit TopK(int k) : k_(k) {}
    void apply(Candidates & c) override {
        kvg_token_data_array & a = c.a;
        if (k_ <= 0 || (size_t) k_ >= a.size) return;
        if (!a.sorted) std::partial_sort(a.data, a.data + k_, a.data + a.size, before);
        a.size = (size_t) k_;
        a.sorted = true;
    }

private:
    int k_;
};

class MinP : public SamplerStage {
public:
    MinP(float p, size_t min_keep) : p_(p), min_keep_(min_keep) {}
    void apply(Candidates & c) override {
        kvg_token_data_array & a = c.a;
        if (!(p_ > 0.0f) || a.size == 0) return;
        const float max_logit = a.data[best_candidate(a)].logit;
        if (!std::isfinite(max_logit)) return;
        // p >= p_min x p_top  <=>  logit >= top logit + temp x log(p_min): no softmax needed.
        const double floor = (double) max_logit + c.temp * std::log((double) std::min(p_, 1.0f));
        auto below = [&](const kvg_token_data & d) { return std::isnan(d.logit) || (double) d.logit < floor; };
        const size_t passing = a.size - (size_t) std::count_if(a.data, a.data + a.size, below);
        if (passing >= min_keep_) {
            a.size = (size_t) (std::remove_if(a.data, a.data + a.size, below) - a.data);  // keeps the order
            return;
        }
        std::sort(a.data, a.data + a.size, before);
        a.size = std::min(min_keep_, a.size);
        a.sorted = true;
    }

private:
    float p_;
    size_t min_keep_;
};

// A candidate and its unnormalised probability.
struct Weighted {
    kvg_token_data d;
    double w;
};

// Drops candidates that cannot be in the nucleus of probability p, so fewer need sorting:
// those below (1-p)/(m-1) of the total sum to less than 1-p, so the nucleus is complete
// before any of them. Halving the cutoff leaves room for rounding.
void drop_outside_nucleus(std::vector<Weighted> & c, double p, double sum) {
    const size_t m = c.size();
    if (m <= 1) return;
    const double cutoff = 0.5 * (1.0 - p) / (double) (m - 1) * sum;
    c.erase(std::remove_if(c.begin(), c.end(), [&](const Weighted & x) { return x.w < cutoff; }), c.end());
}

// Length of the smallest prefix of c (most likely first) whose weight reaches target; all of c
// if none does.
size_t nucleus_size(const std::vector<Weighted> & c, double target) {
    double cum = 0.0;
    for (size_t i = 0; i < c.size(); i++) {
        cum += c[i].w;
        if (cum >= target) return i + 1;
    }
    return c.size();
}

class TopP : public SamplerStage {
public:
    TopP(float p, size_t min_keep) : p_(p), min_keep_(min_keep) {}
    void apply(Candidates & c) override;

private:
    float p_;
    size_t min_keep_;
    std::vector<Weighted> w_;  // scratch
};

void TopP::apply(Candidates & c) {
    kvg_token_data_array & a = c.a;
    if (!(p_ < 1.0f) || a.size == 0) return;
    const float max_logit = a.data[best_candidate(a)].logit;
    if (!std::isfinite(max_logit)) return;
    const double p = std::max(0.0, (double) p_);
    w_.clear();
    double sum = 0.0;
    for (size_t i = 0; i < a.size; i++) {
        w_.push_back({a.data[i], weight(a.data[i].logit, max_logit, c.temp)});
        sum += w_.back().w;
    }
    if (!a.sorted) {
        if (min_keep_ <= 1) drop_outside_nucleus(w_, p, sum);  // min_keep may need the dropped ones
        std::sort(w_.begin(), w_.end(), [](const Weighted & x, const Weighted & y) { return before(x.d, y.d); });
    }
    // Smallest prefix whose probability reaches p, at least min_keep (and one) tokens.
    size_t keep = nucleus_size(w_, p * sum);
    keep = std::min(std::max(keep, min_keep_), w_.size());
    for (size_t i = 0; i < keep; i++) {
        a.data[i] = w_[i].d;
        a.data[i].p = (float) (w_[i].w / sum);
    }
    a.size = keep;
    a.sorted = true;
}

class Temp : public SamplerStage {
public:
    explicit Temp(float t) : t_(t) {}
    void apply(Candidates & c) override {
        kvg_token_data_array & a = c.a;
        if (a.size == 0) return;
        if (!(t_ > 0.0f)) {  // also a NaN temperature: only the best token stays
            a.data[0] = a.data[best_candidate(a)];
            a.size = 1;
            a.sorted = true;
            return;
        }
        c.temp *= (double) t_;
    }

private:
    float t_;
};

class Penalties : public SamplerStage {
public:
    Penalties(int last_n, float repeat, float freq, float present)
        : last_n_(last_n), repeat_(repeat), freq_(freq), present_(present) {}
    void apply(Candidates & c) override;
    Effect effect() const override { return on() && !recent_.empty() ? Effect::other : Effect::keeps; }
    void accept(int token) override {
        if (last_n_ == 0) return;
        recent_.push_back(token);
        if (last_n_ > 0 && (int) recent_.size() > last_n_) recent_.erase(recent_.begin(), recent_.end() - last_n_);
    }
    void reset() override { recent_.clear(); }

private:
    // Index of the candidate with this id, or -1: direct when the array is in id order.
    long find(const kvg_token_data_array & a, int id);
    bool on() const { return repeat_ != 1.0f || freq_ != 0.0f || present_ != 0.0f; }

    int last_n_;
    float repeat_, freq_, present_;
    std::vector<int> recent_;  // accepted tokens, oldest first, at most last_n
    std::vector<int> ids_;     // scratch
    std::unordered_map<int, size_t> index_;  // id -> index, built only for arrays not in id order
};

long Penalties::find(const kvg_token_data_array & a, int id) {
    if (id >= 0 && (size_t) id < a.size && a.data[id].id == id) return id;
    if (index_.empty())
        for (size_t i = 0; i < a.size; i++) index_.emplace(a.data[i].id, i);
    const auto it = index_.find(id);
    return it == index_.end() ? -1 : (long) it->second;
}

void Penalties::apply(Candidates & c) {
    kvg_token_data_array & a = c.a;
    if (!on() || recent_.empty() || a.size == 0) return;
    c.fold_temp();  // frequency and presence subtract from the scaled logits
    ids_.assign(recent_.begin(), recent_.end());
    std::sort(ids_.begin(), ids_.end());
    index_.clear();
    for (size_t i = 0; i < ids_.size();) {
        size_t j = i;
        while (j < ids_.size() && ids_[j] == ids_[i]) ++j;
        const int id = ids_[i], count = (int) (j - i);
        i = j;
        const long at = find(a, id);
        if (at < 0) continue;
        float & l = a.data[at].logit;
        l = l <= 0.0f ? l * repeat_ : l / repeat_;
        l -= (float) count * freq_ + present_;
    }
    a.sorted = false;
}

}  // namespace

void Candidates::fold_temp() {
    if (temp == 1.0) return;
    for (size_t i = 0; i < a.size; i++) a.data[i].logit = (float) ((double) a.data[i].logit / temp);
    temp = 1.0;
}

void SamplerChain::apply(Candidates & c) {
    for (auto & s : stages_) s->apply(c);
}
// Stages that keep the candidates compose; a selection stands only if no stage after it acts.
SamplerStage::Effect SamplerChain::effect() const {
    Effect e = Effect::keeps;
    for (const auto & s : stages_) {
        const Effect se = s->effect();
        if (se == Effect::keeps) continue;
        if (se == Effect::other || e == Effect::picks_best) return Effect::other;
        e = se;
    }
    return e;
}
void SamplerChain::accept(int token) {
    for (auto & s : stages_) s->accept(token);
}
void SamplerChain::reset() {
    for (auto & s : stages_) s->reset();
}

std::unique_ptr<SamplerStage> make_greedy_stage() { return std::make_unique<Greedy>(); }
std::unique_ptr<SamplerStage> make_dist_stage(uint64_t seed) { return std::make_unique<Dist>(seed); }
std::unique_ptr<SamplerStage> make_top_k_stage(int k) { return std::make_unique<TopK>(k); }
std::unique_ptr<SamplerStage> make_top_p_stage(float p, size_t min_keep) { return std::make_unique<TopP>(p, min_keep); }
std::unique_ptr<SamplerStage> make_min_p_stage(float p, size_t min_keep) { return std::make_unique<MinP>(p, min_keep); }
std::unique_ptr<SamplerStage> make_temp_stage(float t) { return std::make_unique<Temp>(t); }
std::unique_ptr<SamplerStage> make_penalties_stage(int last_n, float repeat, float freq, float present) {
    return std::make_unique<Penalties>(last_n, repeat, freq, present);
}

std::unique_ptr<SamplerChain> make_params_chain(const kvg_sampler_params & p) {
    auto chain = std::make_unique<SamplerChain>();
    chain->add(make_penalties_stage(p.repeat_last_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty));
    if (!(p.temp > 0.0f)) { // greedy (also a NaN temperature): no sort, no draw
        chain->add(make_greedy_stage());
        return chain;
    }
    chain->add(make_top_k_stage(p.top_k));
    chain->add(make_min_p_stage(p.min_p, 1));
    chain->add(make_temp_stage(p.temp));
    chain->add(make_top_p_stage(p.top_p, 1));
    chain->add(make_dist_stage(p.seed));
    return chain;
}

// min_element under `before`, in two branch-light passes (greedy decoding calls it per token):
// the largest logit (NaNs never win), then the smallest id holding it; all NaN: the smallest id.
size_t best_candidate(const kvg_token_data_array & a) {
    float top = -INFINITY;
    for (size_t i = 0; i < a.size; i++) top = a.data[i].logit > top ? a.data[i].logit : top;
    size_t best = a.size;
    for (size_t i = 0; i < a.size; i++) {
        if (a.data[i].logit == top && (best == a.size || a.data[i].id < a.data[best].id)) best = i;
    }
    if (best < a.size) return best;
    best = 0;
    for (size_t i = 1; i < a.size; i++) {
        if (a.data[i].id < a.data[best].id) best = i;
    }
    return best;
}

void apply_stage(SamplerStage & stage, kvg_token_data_array & a) {
    a.selected = -1;
    Candidates c{a};
    stage.apply(c);
    c.fold_temp();
}

// best_candidate over logits[0..n) as candidates in id order, without building them.
int argmax(const float * logits, int n) {
    float top = -INFINITY;
    for (int i = 0; i < n; i++) top = logits[i] > top ? logits[i] : top;
    for (int i = 0; i < n; i++) {
        if (logits[i] == top) return i;
    }
    return 0; // all NaN: the smallest id
}

int sample_stage(SamplerStage & stage, const float * logits, int n, std::vector<kvg_token_data> & scratch) {
    if (!logits || n <= 0) return -1;
    if (stage.effect() == SamplerStage::Effect::picks_best) return argmax(logits, n); // greedy decoding
    scratch.resize((size_t) n);
    for (int i = 0; i < n; i++) scratch[(size_t) i] = {i, logits[i], 0.0f};
    kvg_token_data_array a{scratch.data(), (size_t) n, -1, false};
    Candidates c{a};
    stage.apply(c);
    if (a.selected >= 0 && (size_t) a.selected < a.size) return a.data[a.selected].id;
    if (a.size > 0) return a.data[best_candidate(a)].id;
    return argmax(logits, n);
}

}  // namespace kvg
