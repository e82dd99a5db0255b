// The sampler chain of the C API (kvg_sampler_chain_* / kvg_sampler_init_*): each stage against
// a naive reference written here; the params sampler (kvg_sampler_new) against its documented
// equivalent chain and against naive loops written here, token for token.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "sampler-test-common.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

namespace {

struct SamplerFree {
    void operator()(kvg_sampler * s) const { kvg_sampler_free(s); }
};
using Smpl = std::unique_ptr<kvg_sampler, SamplerFree>;

// Builds a chain from stages (the chain owns them).
Smpl chain_of(std::initializer_list<kvg_sampler *> stages) {
    Smpl c(kvg_sampler_chain_new());
    REQUIRE(c);
    for (kvg_sampler * s : stages) {
        REQUIRE(s);
        REQUIRE(kvg_sampler_chain_add(c.get(), s));
    }
    return c;
}

// Candidates in id order, and the array over them.
struct Cands {
    std::vector<kvg_token_data> d;
    kvg_token_data_array a{};
    explicit Cands(const std::vector<float> & logits) {
        for (size_t i = 0; i < logits.size(); i++) d.push_back({(kvg_token) i, logits[i], 0.0f});
        a = {d.data(), d.size(), -1, false};
    }
    std::set<int> ids() const {
        std::set<int> s;
        for (size_t i = 0; i < a.size; i++) s.insert(a.data[i].id);
        return s;
    }
};

// Ids by logit descending, id ascending on ties.
std::vector<int> ranked(const std::vector<float> & l) {
    std::vector<int> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    return order;
}

std::vector<double> softmax(const std::vector<float> & l, double temp = 1.0) {
    const double m = *std::max_element(l.begin(), l.end());
    std::vector<double> p;
    double sum = 0;
    for (float x : l) {
        p.push_back(std::exp((x - m) / temp));
        sum += p.back();
    }
    for (double & x : p) x /= sum;
    return p;
}

}  // namespace

TEST_CASE("greedy selects the argmax, lowest id on ties, NaN skipped") {
    Smpl g(kvg_sampler_init_greedy());
    const std::vector<float> l = {0.1f, 2.0f, std::nanf(""), 2.0f, 1.9f};
    CHECK(kvg_sampler_sample(g.get(), l.data(), 5) == 1);
    Cands c(l);
    REQUIRE(kvg_sampler_apply(g.get(), &c.a));
    CHECK(c.a.selected == 1);
    CHECK(c.a.size == 5);
    for (uint32_t seed = 1; seed <= 20; seed++) {
        const std::vector<float> r = random_logits(3000, seed, 4.0f);
        CHECK(kvg_sampler_sample(g.get(), r.data(), 3000) == ranked(r)[0]);
    }
}

TEST_CASE("greedy on candidates out of id order: ties by id, -0 = +0, -inf, NaN, all NaN") {
    Smpl g(kvg_sampler_init_greedy());
    const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
    struct Case { std::vector<int> ids; std::vector<float> logits; int want; };
    const std::vector<Case> cases = {
        {{5, 9, 3, 1}, {1.0f, 2.0f, 2.0f, 0.5f}, 3},       // tie: the smaller id, not the first place
        {{7, 2, 4}, {0.0f, -0.0f, nan}, 2},                // -0 and +0 tie
        {{8, 6, 1}, {-inf, nan, -inf}, 1},                 // all -inf (and a NaN): smallest id among -inf
        {{4, 2, 9}, {nan, nan, nan}, 2},                   // all NaN: smallest id
        {{3, 0}, {nan, -5.0f}, 0},
    };
    for (const Case & k : cases) {
        std::vector<kvg_token_data> d;
        for (size_t i = 0; i < k.ids.size(); i++) d.push_back({(kvg_token) k.ids[i], k.logits[i], 0.0f});
        kvg_token_data_array a = {d.data(), d.size(), -1, false};
        REQUIRE(kvg_sampler_apply(g.get(), &a));
        REQUIRE(a.selected >= 0);
        CHECK(d[(size_t) a.selected].id == k.want);
    }
}

TEST_CASE("top-k keeps exactly the k largest, sorted") {
    const std::vector<float> l = random_logits(1000, 11, 3.0f);
    const std::vector<int> order = ranked(l);
    for (int k : {1, 5, 40, 999}) {
        INFO("k " << k);
        Smpl s(kvg_sampler_init_top_k(k));
        Cands c(l);
        REQUIRE(kvg_sampler_apply(s.get(), &c.a));
        REQUIRE(c.a.size == (size_t) k);
        CHECK(c.a.sorted);
        for (int i = 0; i < k; i++) CHECK(c.a.data[i].id == order[(size_t) i]);
    }
    for (int k : {0, -3, 1000, 5000}) {  // off: nothing moves
        Smpl s(kvg_sampler_init_top_k(k));
        Cands c(l);
        REQUIRE(kvg_sampler_apply(s.get(), &c.a));
        CHECK(c.a.size == 1000);
        CHECK(c.a.data[7].id == 7);
    }
    // Ties at the boundary keep the lower id.
    Smpl s(kvg_sampler_init_top_k(3));
    Cands c({0.0f, 1.0f, 0.5f, 1.0f, 0.5f});
    kvg_sampler_apply(s.get(), &c.a);
    CHECK(c.ids() == std::set<int>{1, 3, 2});
}

TEST_CASE("top-p keeps the smallest most-probable set reaching p, at least min_keep") {
    const std::vector<float> l = random_logits(5000, 2024, 6.0f);
    const std::vector<int> order = ranked(l);
    const std::vector<double> p = softmax(l);
    for (float top_p : {0.0f, 0.1f, 0.5f, 0.9f, 0.99f}) {
        for (size_t min_keep : {(size_t) 0, (size_t) 1, (size_t) 30}) {
            INFO("p " << top_p << " min_keep " << min_keep);
            size_t want = 0;
            for (double cum = 0; want < order.size();) {
                cum += p[(size_t) order[want++]];
                if (cum >= top_p) break;
            }
            want = std::max(want, std::max(min_keep, (size_t) 1));
            Smpl s(kvg_sampler_init_top_p(top_p, min_keep));
            Cands c(l);
            REQUIRE(kvg_sampler_apply(s.get(), &c.a));
            REQUIRE(c.a.size == want);
            CHECK(c.a.sorted);
            for (size_t i = 0; i < want; i++) {
                CHECK(c.a.data[i].id == order[i]);
                CHECK(c.a.data[i].p == doctest::Approx(p[(size_t) order[i]]).epsilon(1e-5));
            }
        }
    }
    Smpl off(kvg_sampler_init_top_p(1.0f, 1));
    Cands c(l);
    kvg_sampler_apply(off.get(), &c.a);
    CHECK(c.a.size == l.size());
}

TEST_CASE("min-p keeps probability >= p x the top one's, in order; min_keep") {
    const std::vector<float> l = random_logits(4000, 5, 5.0f);
    const std::vector<double> prob = softmax(l);
    const double top = *std::max_element(prob.begin(), prob.end());
    for (float mp : {0.01f, 0.1f, 0.5f, 1.0f}) {
        INFO("min_p " << mp);
        std::vector<int> want;
        for (size_t i = 0; i < l.size(); i++)
            if (prob[i] >= mp * top) want.push_back((int) i);
        Smpl s(kvg_sampler_init_min_p(mp, 1));
        Cands c(l);
        REQUIRE(kvg_sampler_apply(s.get(), &c.a));
        REQUIRE(c.a.size == want.size());
        for (size_t i = 0; i < want.size(); i++) CHECK(c.a.data[i].id == want[i]);  // id order kept
    }
    // Fewer than min_keep pass: the min_keep most probable, sorted.
    Smpl s(kvg_sampler_init_min_p(0.999f, 7));
    Cands c(l);
    kvg_sampler_apply(s.get(), &c.a);
    REQUIRE(c.a.size == 7);
    CHECK(c.a.sorted);
    const std::vector<int> order = ranked(l);
    for (size_t i = 0; i < 7; i++) CHECK(c.a.data[i].id == order[i]);
    Smpl off(kvg_sampler_init_min_p(0.0f, 1));
    Cands c2(l);
    kvg_sampler_apply(off.get(), &c2.a);
    CHECK(c2.a.size == l.size());
}

TEST_CASE("temp divides the logits; t <= 0 keeps only the top one") {
    const std::vector<float> l = {1.0f, -2.0f, 3.0f, 0.5f, 3.0f};
    for (float t : {0.5f, 1.0f, 2.0f}) {
        Smpl s(kvg_sampler_init_temp(t));
        Cands c(l);
        REQUIRE(kvg_sampler_apply(s.get(), &c.a));
        REQUIRE(c.a.size == l.size());
        for (size_t i = 0; i < l.size(); i++) CHECK(c.a.data[i].logit == doctest::Approx(l[i] / t));
    }
    for (float t : {0.0f, -1.0f, std::nanf("")}) {
        Smpl s(kvg_sampler_init_temp(t));
        Cands c(l);
        REQUIRE(kvg_sampler_apply(s.get(), &c.a));
        REQUIRE(c.a.size == 1);
        CHECK(c.a.data[0].id == 2);
        // and a chain with dist then always draws it
        Smpl ch = chain_of({kvg_sampler_init_temp(t), kvg_sampler_init_dist(3)});
        for (int i = 0; i < 100; i++) CHECK(kvg_sampler_sample(ch.get(), l.data(), 5) == 2);
    }
}

// kvg_sampler_sample on a greedy chain skips the candidate array when the stages before the
// greedy one leave it alone (penalties off, or nothing accepted yet): same token as a naive
// argmax, and penalties that act must still change the choice.
TEST_CASE("greedy chains sample the naive argmax; active penalties still count") {
    const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
    auto naive = [](const std::vector<float> & l) { // largest non-NaN, first on ties; all NaN: 0
        int best = -1;
        for (size_t i = 0; i < l.size(); i++) {
            if (!std::isnan(l[i]) && (best < 0 || l[i] > l[(size_t) best])) best = (int) i;
        }
        return best < 0 ? 0 : best;
    };
    std::vector<std::vector<float>> cases = {
        {0.1f, 2.0f, nan, 2.0f, 1.9f}, {-0.0f, 0.0f, -1.0f}, {nan, -inf, -inf}, {nan, nan, nan},
        {-inf, -inf}, {nan, -5.0f, 3.0f, inf, inf}, {1.0f}};
    for (uint32_t seed = 1; seed <= 10; seed++) cases.push_back(random_logits(512, seed, 4.0f));
    Smpl plain(kvg_sampler_init_greedy());
    Smpl off = chain_of({kvg_sampler_init_penalties(64, 1.0f, 0.0f, 0.0f), kvg_sampler_init_greedy()});
    Smpl fresh = chain_of({kvg_sampler_init_penalties(64, 2.0f, 0.0f, 0.0f), kvg_sampler_init_greedy()});
    kvg_sampler_accept(off.get(), 1);
    for (const std::vector<float> & l : cases) {
        const int n = (int) l.size();
        CHECK(kvg_sampler_sample(plain.get(), l.data(), n) == naive(l));
        CHECK(kvg_sampler_sample(off.get(), l.data(), n) == naive(l));
        CHECK(kvg_sampler_sample(fresh.get(), l.data(), n) == naive(l));
    }
    // after accepting the top token, a repeat penalty of 4 moves the choice to the runner-up
    const std::vector<float> l = {1.0f, 3.0f, 2.0f};
    kvg_sampler_accept(fresh.get(), 1);
    CHECK(kvg_sampler_sample(fresh.get(), l.data(), 3) == 2);
    // a stage after the greedy one decides: greedy then dist draws among all tokens
    // (the argmax's probability < 1), so not always the argmax
    Smpl after = chain_of({kvg_sampler_init_greedy(), kvg_sampler_init_dist(7)});
    const std::vector<float> flat = {0.0f, 0.0f, 0.1f, 0.0f};
    bool other = false;
    for (int i = 0; i < 64; i++) other |= kvg_sampler_sample(after.get(), flat.data(), 4) != 2;
    CHECK(other);
}

TEST_CASE("penalties follow llama.cpp's formula on the accepted tokens") {
    const std::vector<float> l = {3.0f, 2.5f, -1.0f, 1.0f, 0.0f, 2.0f};
    const float rep = 2.0f, freq = 0.25f, pres = 0.5f;
    // history 0 0 2 5 0 (oldest first): hand computation per window
    auto hand = [&](const std::vector<int> & window) {
        std::vector<float> out = l;
        for (size_t id = 0; id < l.size(); id++) {
            const int count = (int) std::count(window.begin(), window.end(), (int) id);
            if (count == 0) continue;
            float x = l[id] <= 0 ? l[id] * rep : l[id] / rep;
            out[id] = x - (count * freq + pres);
        }
        return out;
    };
    const std::vector<int> hist = {0, 0, 2, 5, 0};
    struct Case {
        int last_n;
        std::vector<int> window;
    };
    for (const Case & k : {Case{-1, hist}, Case{3, {2, 5, 0}}, Case{1, {0}}, Case{0, {}}}) {
        INFO("last_n " << k.last_n);
        Smpl s(kvg_sampler_init_penalties(k.last_n, rep, freq, pres));
        for (int t : hist) kvg_sampler_accept(s.get(), t);
        const std::vector<float> want = hand(k.window);
        Cands c(l);
        REQUIRE(kvg_sampler_apply(s.get(), &c.a));
        for (size_t i = 0; i < l.size(); i++) CHECK(c.a.data[i].logit == want[i]);
        // the same on candidates not in id order
        Cands r(l);
        std::reverse(r.d.begin(), r.d.end());
        kvg_sampler_apply(s.get(), &r.a);
        for (size_t i = 0; i < l.size(); i++) CHECK(r.a.data[i].logit == want[(size_t) r.a.data[i].id]);
        kvg_sampler_reset(s.get());  // forgets the history
        Cands z(l);
        kvg_sampler_apply(s.get(), &z.a);
        for (size_t i = 0; i < l.size(); i++) CHECK(z.a.data[i].logit == l[i]);
    }
    // sample() accepts what it returns: greedy steps away from a repeated token.
    Smpl ch = chain_of({kvg_sampler_init_penalties(-1, 1.0f, 0.0f, 1.0f), kvg_sampler_init_greedy()});
    const std::vector<float> flat = {1.0f, 0.9f, 0.8f};
    CHECK(kvg_sampler_sample(ch.get(), flat.data(), 3) == 0);
    CHECK(kvg_sampler_sample(ch.get(), flat.data(), 3) == 1);
    CHECK(kvg_sampler_sample(ch.get(), flat.data(), 3) == 2);
}

TEST_CASE("dist: empirical frequencies match the softmax") {
    const std::vector<float> l = {1.0f, 0.0f, 2.0f, -0.5f, 1.5f, 0.25f};
    const int n = (int) l.size(), draws = 200000;
    for (float t : {1.0f, 0.7f, 2.0f}) {
        INFO("temp " << t);
        const std::vector<double> want = softmax(l, t);
        Smpl ch = chain_of({kvg_sampler_init_temp(t), kvg_sampler_init_dist(777)});
        std::vector<int> count((size_t) n, 0);
        for (int i = 0; i < draws; i++) count[(size_t) kvg_sampler_sample(ch.get(), l.data(), n)]++;
        for (int id = 0; id < n; id++) {
            const double p = want[(size_t) id], freq = (double) count[(size_t) id] / draws;
            const double sigma = std::sqrt(p * (1 - p) / draws);
            INFO("id " << id << " p " << p << " freq " << freq);
            CHECK(std::fabs(freq - p) < 5 * sigma);
        }
    }
}

namespace {

// The chain equivalent to kvg_sampler_new(p).
Smpl chain_like(const kvg_sampler_params & p) {
    return chain_of({kvg_sampler_init_penalties(p.repeat_last_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty),
                     kvg_sampler_init_top_k(p.top_k), kvg_sampler_init_min_p(p.min_p, 1), kvg_sampler_init_temp(p.temp),
                     kvg_sampler_init_top_p(p.top_p, 1), kvg_sampler_init_dist(p.seed)});
}

kvg_sampler_params params(float temp, int top_k, float top_p, float min_p, float rep, float freq, float pres, int last_n,
                          uint64_t seed) {
    kvg_sampler_params p = kvg_sampler_default_params();
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = rep;
    p.frequency_penalty = freq;
    p.presence_penalty = pres;
    p.repeat_last_n = last_n;
    p.seed = seed;
    return p;
}

// kvg_sampler_new's documented procedure in plain loops, sharing no code with the library: the
// penalties over the window, then the argmax (temp <= 0, or a +inf or no finite logit) or
// top-k, min-p, the softmax at temp, top-p and an inverse-CDF draw by splitmix64's
// (u64 >> 11) / 2^53, walking the candidates in id order, or most likely first once top-k or
// top-p sorted them.
class NaiveSampler {
public:
    explicit NaiveSampler(const kvg_sampler_params & p) : p_(p), state_(p.seed) {}
    void accept(int token) { history_.push_back(token); }
    void reset() {
        history_.clear();
        state_ = p_.seed;
    }
    int sample(std::vector<float> l) {
        penalize(l);
        const int best = first_max(l);
        if (!(p_.temp > 0.0f) || !std::isfinite(l[(size_t) best])) return best;
        const double max = l[(size_t) best];
        for (float & x : l) x = std::isnan(x) ? -INFINITY : x; // never drawn
        const bool cut_k = p_.top_k > 0 && (size_t) p_.top_k < l.size();
        std::vector<int> ids(l.size());
        if (cut_k || p_.top_p < 1.0f) ids = ranked(l); // else id order
        else std::iota(ids.begin(), ids.end(), 0);
        if (cut_k) ids.resize((size_t) p_.top_k);
        if (p_.min_p > 0.0f) // probability (at temperature 1) >= min_p x the top one's
            ids.erase(std::remove_if(ids.begin(), ids.end(),
                                     [&](int id) { return std::exp(l[(size_t) id] - max) < std::min(p_.min_p, 1.0f); }),
                      ids.end());
        std::vector<double> w;
        double sum = 0;
        for (int id : ids) {
            w.push_back(std::exp(((double) l[(size_t) id] - max) / p_.temp));
            sum += w.back();
        }
        if (p_.top_p < 1.0f) { // the smallest most-probable prefix reaching top_p, at least one
            const double target = std::max(0.0f, p_.top_p) * sum;
            size_t keep = 0;
            for (double cum = 0; keep < ids.size() && (keep == 0 || cum < target);) cum += w[keep++];
            w.resize(keep);
            sum = std::accumulate(w.begin(), w.end(), 0.0);
        }
        const double r = next_double() * sum;
        double cum = 0;
        int last = ids[0];
        for (size_t i = 0; i < w.size(); i++) {
            if (w[i] <= 0) continue;
            cum += w[i];
            last = ids[i];
            if (r < cum) break;
        }
        return last;
    }

private:
    void penalize(std::vector<float> & l) const {
        const size_t n = p_.repeat_last_n < 0 ? history_.size() : std::min(history_.size(), (size_t) p_.repeat_last_n);
        std::vector<int> counts(l.size(), 0); // of each id in the window
        for (auto t = history_.end() - (long) n; t != history_.end(); ++t)
            if (*t >= 0 && (size_t) *t < l.size()) counts[(size_t) *t]++;
        for (size_t id = 0; id < l.size(); id++) {
            const int count = counts[id];
            if (count == 0) continue;
            l[id] = l[id] <= 0 ? l[id] * p_.repeat_penalty : l[id] / p_.repeat_penalty;
            l[id] -= count * p_.frequency_penalty + p_.presence_penalty;
        }
    }
    static int first_max(const std::vector<float> & l) { // NaN skipped; all NaN: 0
        int best = -1;
        for (size_t i = 0; i < l.size(); i++)
            if (!std::isnan(l[i]) && (best < 0 || l[i] > l[(size_t) best])) best = (int) i;
        return std::max(best, 0);
    }
    double next_double() { // splitmix64
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return (double) ((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
    }

    kvg_sampler_params p_;
    uint64_t state_;
    std::vector<int> history_; // accepted tokens, oldest first
};

// Draws n tokens from both samplers (callables from the logits to a token) on changing logits
// (now and then a NaN, +inf or all -inf step); returns how many agree.
template <typename A, typename B> int agreeing_draws(A a, B b, int n, int n_vocab, float scale) {
    int same = 0;
    for (int i = 0; i < n; i++) {
        std::vector<float> l = random_logits(n_vocab, (uint32_t) i * 7919u + 1u, scale);
        if (i % 97 == 5) l[(size_t) (i % n_vocab)] = std::nanf("");
        if (i % 211 == 7) l[(size_t) (i * 3 % n_vocab)] = std::numeric_limits<float>::infinity();
        if (i % 503 == 11) std::fill(l.begin(), l.end(), -std::numeric_limits<float>::infinity());
        same += a(l) == b(l);
    }
    return same;
}

// kvg_sampler_sample as such a callable.
auto draw_from(kvg_sampler * s) {
    return [s](const std::vector<float> & l) { return kvg_sampler_sample(s, l.data(), (int32_t) l.size()); };
}

// NaiveSampler's draw as such a callable; it accepts what it draws, as kvg_sampler_sample does.
auto draw_from(NaiveSampler & s) {
    return [&s](const std::vector<float> & l) {
        const int t = s.sample(l);
        s.accept(t);
        return t;
    };
}

}  // namespace

TEST_CASE("kvg_sampler_new draws the tokens of its equivalent chain and of naive loops") {
    const kvg_sampler_params sets[] = {
        kvg_sampler_default_params(),
        params(1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 64, 1),         // plain softmax over everything
        params(0.7f, 0, 0.9f, 0.0f, 1.0f, 0.0f, 0.0f, 64, 2),         // top-p over the whole vocab
        params(1.2f, 50, 0.95f, 0.05f, 1.1f, 0.0f, 0.0f, 64, 3),      // all stages
        params(0.9f, 0, 1.0f, 0.1f, 1.3f, 0.2f, 0.3f, -1, 4),         // penalties over everything
        params(1.5f, 200, 0.8f, 0.0f, 0.8f, 0.1f, 0.0f, 16, 5),       // repeat < 1
        params(0.0f, 40, 0.95f, 0.0f, 1.2f, 0.0f, 0.5f, 8, 6),        // greedy
        params(1.0f, 3, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 64, 7),         // top-p 0
    };
    const int draws = 3000, n_vocab = 2000;
    int total = 0, agree = 0;
    for (const kvg_sampler_params & p : sets) {
        INFO("temp " << p.temp << " top_k " << p.top_k << " top_p " << p.top_p << " seed " << p.seed);
        Smpl one(kvg_sampler_new(p)), ch = chain_like(p), twin(kvg_sampler_new(p));
        NaiveSampler naive(p);
        for (int t : {5, 17, 5, 900, 5}) {  // a prompt the penalties see
            kvg_sampler_accept(one.get(), t);
            kvg_sampler_accept(ch.get(), t);
            kvg_sampler_accept(twin.get(), t);
            naive.accept(t);
        }
        const int same = agreeing_draws(draw_from(one.get()), draw_from(ch.get()), draws, n_vocab, 6.0f);
        CHECK(same == draws);
        CHECK(agreeing_draws(draw_from(twin.get()), draw_from(naive), draws, n_vocab, 6.0f) == draws);
        total += draws;
        agree += same;
        // After a reset all restart from the seed and still agree.
        for (kvg_sampler * s : {one.get(), ch.get(), twin.get()}) kvg_sampler_reset(s);
        naive.reset();
        CHECK(agreeing_draws(draw_from(one.get()), draw_from(ch.get()), 500, n_vocab, 6.0f) == 500);
        CHECK(agreeing_draws(draw_from(twin.get()), draw_from(naive), 500, n_vocab, 6.0f) == 500);
    }
    MESSAGE("chain vs kvg_sampler_new: " << agree << " of " << total << " draws agree");
    // A nested chain is the same chain.
    const kvg_sampler_params p = sets[3];
    Smpl one(kvg_sampler_new(p));
    Smpl inner = chain_of({kvg_sampler_init_top_k(p.top_k), kvg_sampler_init_min_p(p.min_p, 1)});
    Smpl outer = chain_of({kvg_sampler_init_penalties(p.repeat_last_n, p.repeat_penalty, 0.0f, 0.0f), inner.release(),
                           kvg_sampler_init_temp(p.temp), kvg_sampler_init_top_p(p.top_p, 1), kvg_sampler_init_dist(p.seed)});
    CHECK(kvg_sampler_chain_n(outer.get()) == 5);
    CHECK(agreeing_draws(draw_from(one.get()), draw_from(outer.get()), 1000, 500, 4.0f) == 1000);
}

TEST_CASE("reset restarts the draws from the seed") {
    const std::vector<float> l = random_logits(1000, 9, 2.0f);
    Smpl ch = chain_of({kvg_sampler_init_penalties(32, 1.3f, 0.1f, 0.1f), kvg_sampler_init_top_k(100),
                        kvg_sampler_init_temp(1.0f), kvg_sampler_init_dist(42)});
    auto run = [&] {
        std::vector<int> out;
        for (int i = 0; i < 1000; i++) out.push_back(kvg_sampler_sample(ch.get(), l.data(), 1000));
        return out;
    };
    const std::vector<int> a = run();
    const std::vector<int> b = run();  // continues: different
    kvg_sampler_reset(ch.get());
    const std::vector<int> c = run();
    CHECK(a != b);
    CHECK(a == c);
}

TEST_CASE("apply sets selected, p, and keeps the candidates left in front") {
    const std::vector<float> l = random_logits(500, 77, 3.0f);
    const std::vector<int> order = ranked(l);
    Smpl ch = chain_of({kvg_sampler_init_top_k(3), kvg_sampler_init_temp(0.5f), kvg_sampler_init_dist(1)});
    std::set<int> seen;
    for (int i = 0; i < 300; i++) {
        Cands c(l);
        c.a.selected = 123;  // stale: apply resets it
        REQUIRE(kvg_sampler_apply(ch.get(), &c.a));
        REQUIRE(c.a.size == 3);
        REQUIRE(c.a.selected >= 0);
        REQUIRE(c.a.selected < 3);
        seen.insert(c.a.data[c.a.selected].id);
        double sum = 0;
        for (size_t j = 0; j < 3; j++) sum += c.a.data[j].p;
        CHECK(sum == doctest::Approx(1.0));
        CHECK(c.a.data[0].logit == doctest::Approx(l[(size_t) order[0]] / 0.5f));  // temp written back
    }
    CHECK(seen == std::set<int>{order[0], order[1], order[2]});
    // Without a selecting stage, selected stays -1 and sample() falls back to the best candidate.
    Smpl k(kvg_sampler_init_top_k(10));
    Cands c(l);
    kvg_sampler_apply(k.get(), &c.a);
    CHECK(c.a.selected == -1);
    CHECK(kvg_sampler_sample(k.get(), l.data(), 500) == order[0]);
    Smpl empty(kvg_sampler_chain_new());
    CHECK(kvg_sampler_chain_n(empty.get()) == 0);
    CHECK(kvg_sampler_sample(empty.get(), l.data(), 500) == order[0]);
    kvg_token_data_array none = {nullptr, 0, 5, false};
    CHECK(kvg_sampler_apply(ch.get(), &none));
    CHECK(none.selected == -1);
}

TEST_CASE("NULL and wrong-kind arguments") {
    const float l[3] = {0.0f, 1.0f, 2.0f};
    Smpl chain(kvg_sampler_chain_new());
    Smpl one(kvg_sampler_new(kvg_sampler_default_params()));
    Smpl stage(kvg_sampler_init_greedy());
    CHECK_FALSE(kvg_sampler_chain_add(nullptr, stage.get()));
    CHECK_FALSE(kvg_sampler_chain_add(chain.get(), nullptr));
    Smpl other(kvg_sampler_init_top_k(2));
    CHECK_FALSE(kvg_sampler_chain_add(stage.get(), other.get()));  // a stage is not a chain; other stays ours
    CHECK_FALSE(kvg_sampler_chain_add(chain.get(), chain.get()));
    CHECK_FALSE(kvg_sampler_chain_add(chain.get(), one.get()));
    CHECK_FALSE(kvg_sampler_chain_add(one.get(), stage.get()));
    CHECK(kvg_sampler_chain_n(nullptr) == -1);
    CHECK(kvg_sampler_chain_n(stage.get()) == -1);
    CHECK(kvg_sampler_chain_n(one.get()) == -1);
    CHECK(kvg_sampler_chain_n(chain.get()) == 0);
    CHECK(kvg_sampler_chain_add(chain.get(), stage.release()));  // now owned by the chain
    CHECK(kvg_sampler_chain_n(chain.get()) == 1);
    CHECK(kvg_sampler_sample(chain.get(), l, 3) == 2);
    CHECK(kvg_sampler_sample(nullptr, l, 3) == -1);
    CHECK(kvg_sampler_sample(chain.get(), nullptr, 3) == -1);
    CHECK(kvg_sampler_sample(chain.get(), l, 0) == -1);
    std::vector<kvg_token_data> d = {{0, 1.0f, 0.0f}};
    kvg_token_data_array a = {d.data(), 1, -1, false};
    CHECK_FALSE(kvg_sampler_apply(nullptr, &a));
    CHECK_FALSE(kvg_sampler_apply(chain.get(), nullptr));
    CHECK_FALSE(kvg_sampler_apply(one.get(), &a));
    kvg_token_data_array bad = {nullptr, 4, -1, false};
    CHECK_FALSE(kvg_sampler_apply(chain.get(), &bad));
    kvg_sampler_accept(nullptr, 1);
    kvg_sampler_reset(nullptr);
    kvg_sampler_free(nullptr);
    // Out-of-range accepted ids are ignored by the penalties.
    Smpl pen = chain_of({kvg_sampler_init_penalties(-1, 2.0f, 1.0f, 1.0f), kvg_sampler_init_greedy()});
    kvg_sampler_accept(pen.get(), -5);
    kvg_sampler_accept(pen.get(), 1000);
    CHECK(kvg_sampler_sample(pen.get(), l, 3) == 2);
}
