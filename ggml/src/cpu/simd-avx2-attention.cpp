// AVX2 tiles of flash_attn_ext's prompt path (simd.h's fa_tile_kernels): many query rows against a
// tile of cache positions in f32, as register tiles of a broadcast element times 8 query rows or
// 8 value channels, so no horizontal sums and each K/V element loaded serves several rows.
#include "simd.h"

#include <cmath>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd-avx2.h"

namespace {

using namespace kvg;
using namespace kvg::avx2;

constexpr int QV = FA_TILE_Q / 8; // vectors of query rows
static_assert(FA_TILE_Q % 24 == 0 && FA_TILE_KV % 4 == 0, "scores take 4 positions x 24 rows per register tile");

// 4 positions x 24 query rows: 12 accumulators, 3 query loads and 4 broadcasts per channel.
KVG_TARGET void tile_scores(int64_t D, const float * kf, int64_t ts, int64_t ds, const float * qt, float * s) {
    for (int t0 = 0; t0 < FA_TILE_KV; t0 += 4) {
        for (int r0 = 0; r0 < FA_TILE_Q; r0 += 24) {
            __m256 acc[4][3];
            for (auto & row : acc)
                for (__m256 & a : row) a = _mm256_setzero_ps();
            const float * k = kf + t0 * ts;
            const float * q = qt + r0;
            for (int64_t d = 0; d < D; ++d, k += ds, q += FA_TILE_Q) {
                const __m256 q0 = _mm256_loadu_ps(q), q1 = _mm256_loadu_ps(q + 8), q2 = _mm256_loadu_ps(q + 16);
                for (int i = 0; i < 4; ++i) {
                    const __m256 b = _mm256_broadcast_ss(k + i * ts);
                    acc[i][0] = _mm256_fmadd_ps(b, q0, acc[i][0]);
                    acc[i][1] = _mm256_fmadd_ps(b, q1, acc[i][1]);
                    acc[i][2] = _mm256_fmadd_ps(b, q2, acc[i][2]);
                }
            }
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 3; ++j) _mm256_storeu_ps(s + (t0 + i) * FA_TILE_Q + r0 + 8 * j, acc[i][j]);
        }
    }
}

KVG_TARGET void tile_softmax(float * s, float * m, float * l, float * alpha) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int v = 0; v < QV; ++v) {
        float * col = s + 8 * v;
        __m256 mx = ninf;
        for (int t = 0; t < FA_TILE_KV; ++t) mx = _mm256_max_ps(mx, _mm256_loadu_ps(col + t * FA_TILE_Q));
        const __m256 m_old = _mm256_loadu_ps(m + 8 * v);
        mx = _mm256_max_ps(mx, m_old);
        // rows with nothing seen yet subtract 0 instead of -inf (no NaN; their weights are exp(-inf) = 0)
        const __m256 base = _mm256_andnot_ps(_mm256_cmp_ps(mx, ninf, _CMP_EQ_OQ), mx);
        const __m256 a = exp_nonpositive(_mm256_sub_ps(m_old, base));
        __m256 sum = _mm256_setzero_ps();
        for (int t = 0; t < FA_TILE_KV; ++t) {
            const __m256 w = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(col + t * FA_TILE_Q), base));
            _mm256_storeu_ps(col + t * FA_TILE_Q, w);
            sum = _mm256_add_ps(sum, w);
        }
        _mm256_storeu_ps(l + 8 * v, _mm256_fmadd_ps(_mm256_loadu_ps(l + 8 * v), a, sum));
        _mm256_storeu_ps(m + 8 * v, mx);
        _mm256_storeu_ps(alpha + 8 * v, a);
    }
}

// 3 query rows x 32 channels: 12 accumulators, 4 value loads and 3 broadcasts per position.
KVG_TARGET void tile_values(int64_t n, int nr, const float * s, const float * vf, int64_t vs, int64_t dv,
                            const float * alpha, float * o, int64_t os) {
    for (int r0 = 0; r0 < nr; r0 += 3) {
        for (int64_t i0 = 0; i0 < dv; i0 += 32) {
            __m256 acc[3][4];
            for (int r = 0; r < 3; ++r) {
                const __m256 a = _mm256_broadcast_ss(alpha + r0 + r);
                for (int j = 0; j < 4; ++j)
                    acc[r][j] = _mm256_mul_ps(a, _mm256_loadu_ps(o + (r0 + r) * os + i0 + 8 * j));
            }
            const float * p = s + r0;
            const float * v = vf + i0;
            for (int64_t t = 0; t < n; ++t, p += FA_TILE_Q, v += vs) {
                const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8), v2 = _mm256_loadu_ps(v + 16),
                             v3 = _mm256_loadu_ps(v + 24);
                for (int r = 0; r < 3; ++r) {
                    const __m256 b = _mm256_broadcast_ss(p + r);
                    acc[r][0] = _mm256_fmadd_ps(b, v0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(b, v1, acc[r][1]);
                    acc[r][2] = _mm256_fmadd_ps(b, v2, acc[r][2]);
                    acc[r][3] = _mm256_fmadd_ps(b, v3, acc[r][3]);
                }
            }
            for (int r = 0; r < 3; ++r)
                for (int j = 0; j < 4; ++j) _mm256_storeu_ps(o + (r0 + r) * os + i0 + 8 * j, acc[r][j]);
        }
    }
}

} // namespace

const kvg::fa_tile_kernels * kvg::fa_tile_kernels_avx2() {
    static const fa_tile_kernels k = {tile_scores, tile_softmax, tile_values};
    return &k;
}

#else
const kvg::fa_tile_kernels * kvg::fa_tile_kernels_avx2() { return nullptr; }
#endif
