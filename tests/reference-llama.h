// The Llama forward pass in plain loops: one token at a time, one thread, activations in
// double, weights read from kvgraph's loaded model (kvg::Model) and decoded to float once.
// It shares nothing with the runtime but the loaded weights, so the tests check kvgraph's
// graphs against it; test-model.cpp anchors it to the PyTorch fixtures.
//
// Read top to bottom: the weights as plain arrays, the building blocks (rmsnorm, matmul,
// RoPE, softmax-weighted sum), then the forward pass of one token at one position.
// Attention may be limited to a sliding window plus sink positions (a ring cache).
#pragma once

#include "ggml.h"
#include "model.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

namespace ref {

// ---- the weights, as plain arrays -----------------------------------------------------------

// A matrix of rows x cols floats, row-major: row r holds the weights of output r.
struct Matrix {
    int rows = 0, cols = 0;
    std::vector<float> w;
    const float * row(int r) const { return w.data() + (size_t) r * cols; }
};

// kvgraph's tensors are [ne0 = inputs, ne1 = outputs]: row r of the tensor is row r here.
inline Matrix to_matrix(const ggml_tensor * t) {
    Matrix m;
    m.cols = (int) t->ne[0];
    m.rows = (int) t->ne[1];
    m.w.resize((size_t) m.rows * m.cols);
    ggml_to_float_t decode = kvg::row_decoder(t->type);
    if (!decode) throw std::runtime_error("reference-llama: cannot read a tensor of this type");
    for (int r = 0; r < m.rows; ++r) decode((const char *) t->data + (size_t) r * t->nb[1], m.w.data() + (size_t) r * m.cols, m.cols);
    return m;
}
inline std::vector<float> to_vector(const ggml_tensor * t) { return to_matrix(t).w; }

struct LayerWeights {
    std::vector<float> attn_norm, ffn_norm;
    Matrix wq, wk, wv, wo;       // attention: query, key, value, output
    Matrix w_gate, w_up, w_down; // SwiGLU feed-forward (llama2.c's w1, w3, w2)
};

struct Weights {
    kvg::HParams hp;        // sizes: n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, ...
    Matrix token_embedding; // n_vocab rows of n_embd
    std::vector<LayerWeights> layers;
    std::vector<float> final_norm;
    Matrix classifier;      // n_vocab rows of n_embd (may equal the embedding)
};

inline Weights load_weights(const kvg::Model & m) {
    Weights w;
    w.hp = m.hp;
    w.token_embedding = to_matrix(m.tok_embd);
    for (const kvg::LayerWeights & l : m.layers) {
        LayerWeights lw;
        lw.attn_norm = to_vector(l.attn_norm);
        lw.wq = to_matrix(l.wq);
        lw.wk = to_matrix(l.wk);
        lw.wv = to_matrix(l.wv);
        lw.wo = to_matrix(l.wo);
        lw.ffn_norm = to_vector(l.ffn_norm);
        lw.w_gate = to_matrix(l.ffn_gate);
        lw.w_up = to_matrix(l.ffn_up);
        lw.w_down = to_matrix(l.ffn_down);
        w.layers.push_back(std::move(lw));
    }
    w.final_norm = to_vector(m.output_norm);
    w.classifier = to_matrix(m.output);
    return w;
}

// ---- building blocks ------------------------------------------------------------------------

// x / sqrt(mean(x^2) + eps) * weight
inline std::vector<double> rmsnorm(const std::vector<double> & x, const std::vector<float> & weight, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / (double) x.size() + eps);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * inv * weight[i];
    return out;
}

// out[r] = sum_i W[r][i] * x[i]
inline std::vector<double> matmul(const Matrix & W, const std::vector<double> & x) {
    std::vector<double> out(W.rows);
    for (int r = 0; r < W.rows; ++r) {
        const float * w = W.row(r);
        double s = 0;
        for (int i = 0; i < W.cols; ++i) s += (double) w[i] * x[i];
        out[r] = s;
    }
    return out;
}

// RoPE as llama2.c applies it: in every head, the pairs (v[2i], v[2i+1]) of the first n_rot
// values are rotated by the angle pos * base^(-2i / n_rot).
inline void rope(std::vector<double> & v, int head_size, int n_rot, int pos, double base) {
    for (size_t h = 0; h < v.size(); h += head_size) {
        for (int i = 0; i < n_rot; i += 2) {
            const double angle = pos * std::pow(base, -(double) i / n_rot);
            const double c = std::cos(angle), s = std::sin(angle);
            const double a = v[h + i], b = v[h + i + 1];
            v[h + i] = a * c - b * s;
            v[h + i + 1] = a * s + b * c;
        }
    }
}

// One attention head's output: softmax of the scores (-inf: a position not attended) as
// weights of the value rows, out[i] = sum_j p[j] * value(j)[i]. value(j) gives row j, any
// indexable row of at least dv values. Nothing attended: zeros.
template <class ValueRow>
std::vector<double> attend(const std::vector<double> & scores, int dv, ValueRow value) {
    double max = -INFINITY;
    for (double s : scores) max = s > max ? s : max;
    std::vector<double> out(dv, 0.0);
    if (max == -INFINITY) return out;
    double sum = 0;
    for (size_t j = 0; j < scores.size(); ++j) {
        if (scores[j] == -INFINITY) continue;
        const double p = std::exp(scores[j] - max);
        sum += p;
        const auto row = value((int) j);
        for (int i = 0; i < dv; ++i) out[i] += p * row[i];
    }
    for (double & o : out) o /= sum;
    return out;
}

inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

// ---- the forward pass -----------------------------------------------------------------------

// A model with its KV cache in plain arrays. forward(token, pos) computes the token's
// logits at position pos, after the tokens at positions 0..pos-1 went through forward;
// a smaller pos than before rewinds (its rows are overwritten).
// Attention from position pos covers the positions t <= pos with, if n_window > 0,
// t < n_sink or t > pos - n_window (a ring cache's window and sinks).
class Llama {
  public:
    explicit Llama(const kvg::Model & model, int n_window = 0, int n_sink = 0)
        : w(load_weights(model)), n_window(n_window), n_sink(n_sink),
          key_cache(w.hp.n_layer), value_cache(w.hp.n_layer) {}

    std::vector<double> forward(int token, int pos) {
        const kvg::HParams & hp = w.hp;
        const int dim = hp.n_embd, hs = hp.head_dim(), kv_dim = hp.n_embd_kv();
        const int n_rot = hp.n_rot > 0 ? hp.n_rot : hs;
        const double eps = hp.rms_eps, base = hp.rope_base;
        const int heads_per_kv = hp.n_head / hp.n_head_kv; // grouped-query attention

        // the token's embedding
        std::vector<double> x(w.token_embedding.row(token), w.token_embedding.row(token) + dim);

        for (int l = 0; l < hp.n_layer; ++l) {
            const LayerWeights & lw = w.layers[l];

            // attention: q, k, v of this token, rotated by its position
            std::vector<double> xb = rmsnorm(x, lw.attn_norm, eps);
            std::vector<double> q = matmul(lw.wq, xb), k = matmul(lw.wk, xb), v = matmul(lw.wv, xb);
            rope(q, hs, n_rot, pos, base);
            rope(k, hs, n_rot, pos, base);

            // k and v go into the cache at row pos
            std::vector<double> & kc = key_cache[l], & vc = value_cache[l];
            if (kc.size() < (size_t) (pos + 1) * kv_dim) {
                kc.resize((size_t) (pos + 1) * kv_dim);
                vc.resize((size_t) (pos + 1) * kv_dim);
            }
            std::copy(k.begin(), k.end(), kc.begin() + (size_t) pos * kv_dim);
            std::copy(v.begin(), v.end(), vc.begin() + (size_t) pos * kv_dim);

            // every head attends over the cached positions (causal: up to pos)
            std::vector<double> att(dim);
            for (int h = 0; h < hp.n_head; ++h) {
                const int kv_head = h / heads_per_kv;
                std::vector<double> scores(pos + 1, -INFINITY);
                for (int t = 0; t <= pos; ++t) {
                    if (!attends(pos, t)) continue;
                    const double * key = &kc[(size_t) t * kv_dim + kv_head * hs];
                    double s = 0;
                    for (int i = 0; i < hs; ++i) s += q[h * hs + i] * key[i];
                    scores[t] = s / std::sqrt((double) hs);
                }
                const std::vector<double> o =
                    attend(scores, hs, [&](int t) { return &vc[(size_t) t * kv_dim + kv_head * hs]; });
                std::copy(o.begin(), o.end(), att.begin() + h * hs);
            }

            // output projection and residual
            const std::vector<double> xo = matmul(lw.wo, att);
            for (int i = 0; i < dim; ++i) x[i] += xo[i];

            // feed-forward: w_down(silu(w_gate(x)) * w_up(x)) and residual
            xb = rmsnorm(x, lw.ffn_norm, eps);
            std::vector<double> gate = matmul(lw.w_gate, xb);
            const std::vector<double> up = matmul(lw.w_up, xb);
            for (int i = 0; i < hp.n_ff; ++i) gate[i] = silu(gate[i]) * up[i];
            const std::vector<double> down = matmul(lw.w_down, gate);
            for (int i = 0; i < dim; ++i) x[i] += down[i];
        }

        // final norm and the classifier
        return matmul(w.classifier, rmsnorm(x, w.final_norm, eps));
    }

  private:
    bool attends(int pos, int t) const { return n_window <= 0 || t < n_sink || t > pos - n_window; }

    Weights w;
    int n_window, n_sink;
    std::vector<std::vector<double>> key_cache, value_cache; // [layer][pos * kv_dim + i]
};

// The logits of every position of `tokens` (from position 0), as floats [n][n_vocab].
inline std::vector<float> logits(const kvg::Model & model, const std::vector<int> & tokens, int n_window = 0,
                                 int n_sink = 0) {
    Llama llama(model, n_window, n_sink);
    std::vector<float> out;
    for (size_t p = 0; p < tokens.size(); ++p) {
        const std::vector<double> l = llama.forward(tokens[p], (int) p);
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

} // namespace ref
