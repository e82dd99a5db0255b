#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "sampler-chain.h"
#include "sampler-test-common.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

using kvg::Rng;
using SamplerParams = kvg_sampler_params;

namespace {

struct TokenProb {
    int id;
    float p;
};

// kvg_sampler_new's chain, sampled without accepting: the tests accept by hand.
class Sampler {
public:
    explicit Sampler(const SamplerParams & p) : params_(p), chain_(kvg::make_params_chain(p)) {}
    int sample(const float * logits, int n) { return kvg::sample_stage(*chain_, logits, n, scratch_); }
    void accept(int token) {
        chain_->accept(token);
        accepted_.push_back(token);
    }
    void reset() {
        chain_->reset();
        accepted_.clear();
    }
    static int argmax(const float * logits, int n) { return kvg::argmax(logits, n); }
    std::vector<TokenProb> distribution(const float * logits, int n) const;

private:
    SamplerParams params_;
    std::unique_ptr<kvg::SamplerChain> chain_;
    std::vector<int> accepted_; // for distribution's copy of the chain
    std::vector<kvg_token_data> scratch_;
};

// The distribution sample() draws from, most likely first (ties: lower id): the p that the dist
// stage of a copy of the chain writes (the copy's draw leaves this one's RNG alone), or the
// chosen token with p = 1 where nothing is drawn (greedy).
std::vector<TokenProb> Sampler::distribution(const float * logits, int n) const {
    if (!logits || n <= 0) return {};
    const std::unique_ptr<kvg::SamplerChain> copy = kvg::make_params_chain(params_);
    for (int t : accepted_) copy->accept(t);
    std::vector<kvg_token_data> d;
    for (int i = 0; i < n; i++) d.push_back({i, logits[i], 0.0f});
    kvg_token_data_array a{d.data(), d.size(), -1, false};
    kvg::apply_stage(*copy, a);
    REQUIRE(a.selected >= 0);
    if (a.data[a.selected].p == 0.0f) return {{a.data[a.selected].id, 1.0f}};
    std::vector<TokenProb> out;
    for (size_t i = 0; i < a.size; i++) out.push_back({a.data[i].id, a.data[i].p});
    std::stable_sort(out.begin(), out.end(),
                     [](const TokenProb & x, const TokenProb & y) { return x.p > y.p || (x.p == y.p && x.id < y.id); });
    return out;
}

SamplerParams make_params(float temp, int top_k, float top_p, uint64_t seed) {
    SamplerParams p = kvg_sampler_default_params();
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.seed = seed;
    return p;
}

// Naive reference: full sort, softmax over the top-k, then the nucleus.
struct Ref {
    std::vector<int> ids;    // kept ids, most likely first
    std::vector<double> p;   // their renormalised probabilities
};

Ref naive_reference(const std::vector<float>& logits, float temp, int top_k, float top_p) {
    const int n = (int)logits.size();
    std::vector<int> order((size_t)n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    if (top_k > 0 && top_k < n) order.resize((size_t)top_k);
    const double m = logits[order[0]];
    std::vector<double> p;
    double sum = 0;
    for (int id : order) {
        p.push_back(std::exp((logits[id] - m) / temp));
        sum += p.back();
    }
    for (double& x : p) x /= sum;
    size_t keep = order.size();
    if (top_p < 1.0f) {
        double cum = 0;
        for (size_t i = 0; i < p.size(); i++) {
            cum += p[i];
            if (cum >= top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    Ref r;
    r.ids.assign(order.begin(), order.begin() + (long)keep);
    double kept = 0;
    for (size_t i = 0; i < keep; i++) kept += p[i];
    for (size_t i = 0; i < keep; i++) r.p.push_back(p[i] / kept);
    return r;
}

}  // namespace

TEST_CASE("splitmix64 matches the published reference values") {
    Rng r(0);
    CHECK(r.next_u64() == 0xE220A8397B1DCDAFull);
    CHECK(r.next_u64() == 0x6E789E6AA1B965F4ull);
    CHECK(r.next_u64() == 0x06C45D188009454Full);
    Rng u(7);
    double mean = 0, lo = 1, hi = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double x = u.next_double();
        REQUIRE(x >= 0.0);
        REQUIRE(x < 1.0);
        mean += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
    }
    CHECK(mean / n == doctest::Approx(0.5).epsilon(0.01));
    CHECK(lo < 0.001);
    CHECK(hi > 0.999);
}

TEST_CASE("greedy picks the argmax, lowest index on ties") {
    const std::vector<float> l = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
    for (float temp : {0.0f, -1.0f, std::nanf("")}) {
        Sampler s(make_params(temp, 40, 0.9f, 1));
        for (int i = 0; i < 10; i++) CHECK(s.sample(l.data(), (int)l.size()) == 1);
    }
    CHECK(Sampler::argmax(l.data(), 5) == 1);
    const std::vector<float> with_nan = {std::nanf(""), -5.0f, std::nanf(""), -4.0f};
    CHECK(Sampler::argmax(with_nan.data(), 4) == 3);
    std::vector<float> big = random_logits(32000, 99, 10.0f);
    big[12345] = 50.0f;
    Sampler g(make_params(0.0f, 0, 1.0f, 1));
    CHECK(g.sample(big.data(), 32000) == 12345);
    auto d = g.distribution(big.data(), 32000);
    REQUIRE(d.size() == 1);
    CHECK(d[0].id == 12345);
    CHECK(d[0].p == 1.0f);
}

TEST_CASE("degenerate input") {
    Sampler s(make_params(1.0f, 0, 1.0f, 3));
    const float one = 0.5f;
    CHECK(s.sample(nullptr, 10) == -1);
    CHECK(s.sample(&one, 0) == -1);
    CHECK(s.sample(&one, -3) == -1);
    CHECK(s.sample(&one, 1) == 0);
    CHECK(s.distribution(nullptr, 4).empty());
    const float ninf = -std::numeric_limits<float>::infinity();
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> all_ninf = {ninf, ninf, ninf};
    CHECK(s.sample(all_ninf.data(), 3) == 0);
    const std::vector<float> has_inf = {1.0f, inf, 2.0f, inf};
    CHECK(s.sample(has_inf.data(), 4) == 1);
    // NaN and -inf logits are never drawn.
    const std::vector<float> mixed = {std::nanf(""), 0.0f, ninf, 0.0f, std::nanf("")};
    for (int i = 0; i < 2000; i++) {
        int t = s.sample(mixed.data(), 5);
        CHECK((t == 1 || t == 3));
    }
    // top_p <= 0 keeps only the most likely token.
    Sampler z(make_params(1.0f, 0, 0.0f, 3));
    const std::vector<float> l = {1.0f, 1.2f, 1.1f};
    for (int i = 0; i < 200; i++) CHECK(z.sample(l.data(), 3) == 1);
}

TEST_CASE("fixed seed reproduces an independently computed sequence") {
    // Expected ids from a separate Python implementation of the documented
    // procedure: splitmix64, (u64 >> 11) / 2^53, inverse CDF over candidates
    // in id order (no top-k) or best-first (top-k).
    const std::vector<float> l = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 2.5f, 0.0f, 1.5f};
    Sampler a(make_params(1.0f, 0, 1.0f, 42));
    const std::vector<int> want_a = {5, 1, 4, 4, 0, 5, 2, 5, 4, 4, 2, 4, 4, 4, 5, 2, 1, 4, 1, 5};
    std::vector<int> got_a;
    for (size_t i = 0; i < want_a.size(); i++) got_a.push_back(a.sample(l.data(), 8));
    CHECK(got_a == want_a);
    Sampler b(make_params(0.7f, 4, 1.0f, 12345));
    const std::vector<int> want_b = {4, 4, 4, 4, 4, 4, 4, 4, 4, 1, 4, 4, 5, 1, 7, 4, 5, 4, 1, 4};
    std::vector<int> got_b;
    for (size_t i = 0; i < want_b.size(); i++) got_b.push_back(b.sample(l.data(), 8));
    CHECK(got_b == want_b);
}

TEST_CASE("same seed -> same sequence, different seed -> different sequence") {
    const std::vector<float> l = random_logits(1000, 5, 2.0f);
    auto run = [&](uint64_t seed) {
        Sampler s(make_params(1.0f, 100, 0.95f, seed));
        std::vector<int> out;
        for (int i = 0; i < 2000; i++) out.push_back(s.sample(l.data(), 1000));
        return out;
    };
    const std::vector<int> a = run(1), b = run(1), c = run(2);
    CHECK(a == b);
    int differ = 0;
    for (size_t i = 0; i < a.size(); i++) differ += a[i] != c[i];
    CHECK(differ > 1500);  // ~0.98 of draws differ for independent streams here
    // reset() restarts the stream.
    Sampler s(make_params(1.0f, 100, 0.95f, 1));
    for (int i = 0; i < 10; i++) s.sample(l.data(), 1000);
    s.reset();
    std::vector<int> again;
    for (int i = 0; i < 2000; i++) again.push_back(s.sample(l.data(), 1000));
    CHECK(again == a);
}

TEST_CASE("empirical frequencies match the analytic softmax") {
    const std::vector<float> l = {1.0f, 0.0f, 2.0f, -0.5f, 1.5f, 0.25f};
    const int n = (int)l.size();
    const int draws = 200000;
    struct Cfg {
        float temp;
        int top_k;
        float top_p;
    };
    for (Cfg cfg : {Cfg{1.0f, 0, 1.0f}, Cfg{0.7f, 0, 1.0f}, Cfg{2.0f, 0, 1.0f}, Cfg{1.0f, 3, 1.0f},
                    Cfg{1.0f, 0, 0.8f}, Cfg{1.3f, 5, 0.9f}}) {
        INFO("temp " << cfg.temp << " top_k " << cfg.top_k << " top_p " << cfg.top_p);
        const Ref ref = naive_reference(l, cfg.temp, cfg.top_k, cfg.top_p);
        std::vector<double> want((size_t)n, 0.0);
        for (size_t i = 0; i < ref.ids.size(); i++) want[(size_t)ref.ids[i]] = ref.p[i];

        Sampler s(make_params(cfg.temp, cfg.top_k, cfg.top_p, 777));
        std::vector<int> count((size_t)n, 0);
        for (int i = 0; i < draws; i++) count[(size_t)s.sample(l.data(), n)]++;
        for (int id = 0; id < n; id++) {
            const double p = want[(size_t)id];
            const double freq = (double)count[(size_t)id] / draws;
            const double sigma = std::sqrt(std::max(p * (1 - p), 1e-12) / draws);
            INFO("id " << id << " p " << p << " freq " << freq);
            if (p == 0.0) {
                CHECK(count[(size_t)id] == 0);
            } else {
                CHECK(std::fabs(freq - p) < 5 * sigma);
            }
        }
        // distribution() reports the same probabilities.
        auto d = s.distribution(l.data(), n);
        REQUIRE(d.size() == ref.ids.size());
        for (size_t i = 0; i < d.size(); i++) {
            CHECK(d[i].id == ref.ids[i]);
            CHECK(d[i].p == doctest::Approx(ref.p[i]).epsilon(1e-6));
        }
    }
}

TEST_CASE("top-k never returns a token outside the k most likely") {
    const int n = 5000;
    for (int k : {1, 5, 40}) {
        std::vector<float> l = random_logits(n, (uint32_t)k, 1.0f);
        const Ref ref = naive_reference(l, 1.0f, k, 1.0f);
        const std::set<int> allowed(ref.ids.begin(), ref.ids.end());
        REQUIRE((int)allowed.size() == k);
        Sampler s(make_params(5.0f, k, 1.0f, (uint64_t)k));  // high temp: flat inside top-k
        std::set<int> seen;
        int outside = 0;
        for (int i = 0; i < 3000; i++) {
            int t = s.sample(l.data(), n);
            outside += allowed.count(t) == 0;
            seen.insert(t);
        }
        CHECK(outside == 0);
        CHECK(seen == allowed);  // and every one of them does come up
    }
    // Ties at the k boundary: the lower id is kept.
    const std::vector<float> tie = {0.0f, 1.0f, 0.5f, 1.0f, 0.5f};
    Sampler s(make_params(1.0f, 3, 1.0f, 9));
    for (int i = 0; i < 2000; i++) {
        int t = s.sample(tie.data(), 5);
        CHECK((t == 1 || t == 3 || t == 2));
    }
}

TEST_CASE("top-p never returns a token outside the naive nucleus") {
    const int n = 32000;
    const std::vector<float> l = random_logits(n, 2024, 8.0f);
    struct Cfg {
        int top_k;
        float top_p;
        float temp;
    };
    for (Cfg cfg : {Cfg{0, 0.1f, 1.0f}, Cfg{0, 0.5f, 1.0f}, Cfg{0, 0.9f, 0.8f}, Cfg{0, 0.99f, 1.5f},
                    Cfg{50, 0.9f, 1.0f}, Cfg{1000, 0.7f, 1.0f}}) {
        INFO("top_k " << cfg.top_k << " top_p " << cfg.top_p << " temp " << cfg.temp);
        const Ref ref = naive_reference(l, cfg.temp, cfg.top_k, cfg.top_p);
        const std::set<int> nucleus(ref.ids.begin(), ref.ids.end());
        REQUIRE(nucleus.size() > 1);
        REQUIRE((int)nucleus.size() < (cfg.top_k > 0 ? cfg.top_k : n));  // top-p really cut something
        Sampler s(make_params(cfg.temp, cfg.top_k, cfg.top_p, 31337));
        auto d = s.distribution(l.data(), n);
        std::set<int> got;
        for (auto& tp : d) got.insert(tp.id);
        CHECK(got == nucleus);
        int outside = 0;
        for (int i = 0; i < 200; i++) outside += nucleus.count(s.sample(l.data(), n)) == 0;
        CHECK(outside == 0);
    }
}

TEST_CASE("temperature -> 0+ approaches greedy") {
    std::vector<float> l = random_logits(2000, 77, 3.0f);
    l[17] = *std::max_element(l.begin(), l.end()) + 0.01f;  // a known gap to the runner-up
    const int best = 17;
    REQUIRE(Sampler::argmax(l.data(), 2000) == best);
    double prev_freq = 0.0;
    for (float temp : {2.0f, 1.0f, 0.5f, 0.1f, 0.01f, 1e-4f}) {
        Sampler s(make_params(temp, 0, 1.0f, 5));
        int hits = 0;
        for (int i = 0; i < 2000; i++) hits += s.sample(l.data(), 2000) == best;
        const double freq = hits / 2000.0;
        INFO("temp " << temp << " argmax frequency " << freq);
        CHECK(freq >= prev_freq);
        prev_freq = freq;
    }
    CHECK(prev_freq == 1.0);
}

TEST_CASE("penalties: llama.cpp's repeat / frequency / presence rules on the accepted tokens") {
    SamplerParams p = kvg_sampler_default_params();
    p.temp = 0.0f; // greedy on the penalized logits
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.25f;
    p.presence_penalty = 0.5f;
    p.repeat_last_n = 3;
    Sampler s(p);
    const std::vector<float> logits = {3.0f, 2.5f, -1.0f, 1.0f};
    CHECK(s.sample(logits.data(), 4) == 0); // nothing accepted: plain argmax
    s.accept(0);
    s.accept(0);
    // token 0: 3 / 2 - 2 * 0.25 - 0.5 = 0.5; token 1 untouched (2.5) wins
    CHECK(s.sample(logits.data(), 4) == 1);
    auto d = s.distribution(logits.data(), 4);
    REQUIRE(d.size() == 1);
    CHECK(d[0].id == 1);
    s.accept(1); // history 0 0 1: token 1 -> 2.5 / 2 - 0.25 - 0.5 = 0.5, token 3 (1.0) wins
    CHECK(s.sample(logits.data(), 4) == 3);
    s.accept(3); // window of 3: 0 1 3 -> 0: 3/2 - .75 = 0.75, 1: 0.5, 3: 1/2 - .75 = -0.25, 2: -1: token 0
    CHECK(s.sample(logits.data(), 4) == 0);
    s.accept(2); // window: 1 3 2 -> token 0 no longer penalized
    CHECK(s.sample(logits.data(), 4) == 0);
    // a negative logit is multiplied: token 2 = -1 * 2 - .75 = -2.75 (below every other)
    p.repeat_last_n = -1;
    Sampler all(p);
    for (int t : {0, 1, 3}) all.accept(t);
    const std::vector<float> l2 = {1.0f, 1.0f, -0.1f, 1.0f};
    CHECK(all.sample(l2.data(), 4) == 2); // 0,1,3: 1/2 - .75 = -0.25 each; 2: -0.1 untouched
    all.reset();
    CHECK(all.sample(l2.data(), 4) == 0);
}

TEST_CASE("min-p keeps the tokens at least min_p times as likely as the top one") {
    SamplerParams p = kvg_sampler_default_params();
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.3f;
    Sampler s(p);
    // probabilities relative to the top: 1, e^-1 = 0.37, e^-2 = 0.14, e^-0.5 = 0.61
    const std::vector<float> logits = {0.0f, -1.0f, -2.0f, -0.5f};
    const auto d = s.distribution(logits.data(), 4);
    REQUIRE(d.size() == 3);
    std::set<int> ids;
    double total = 0, z = 1 + std::exp(-1.0) + std::exp(-0.5);
    for (const auto & t : d) { ids.insert(t.id); total += t.p; }
    CHECK(ids == std::set<int>{0, 1, 3});
    CHECK(total == doctest::Approx(1.0));
    CHECK(d[0].id == 0);
    CHECK(d[0].p == doctest::Approx(1.0 / z).epsilon(1e-5));
    for (int i = 0; i < 2000; ++i) CHECK(s.sample(logits.data(), 4) != 2);
}
