// AVX-512 VNNI panel tiles for the k-quants and iq4_nl, over the same q8_0 activation
// panels as the q8_0/q4_0 tiles (simd.h): products of panel_min (16) or more activation rows
// take q8_0 activations for these weights too (kernels-matmul.cpp), whose per-32 scales
// are finer than q8_K's per-256 ones.
//
// A tile first decodes each weight block of its rows into unsigned bytes in element order
// plus float scales per sub-block (the decoding is shared by the 16-32 activation rows of
// the tile's panels), then for each 32-value sub-block broadcasts 4 bytes at a time against
// the panels with vpdpbusd (unsigned weights x signed activations), as the q8_0 tiles do:
//   k-quants with mins (q4_K, q5_K):  d*sc*xd*dot(q, x) - dmin*m*xd*sum(x), sum(x) from
//                                      the panel's -8 * sum field
//   16-value scales and an offset (q6_K: q - 32, q3_K: q - 4): one dot per 16-value half,
//                                      each started at -offset * (the half's activation sum)
//   16-value scales and mins (q2_K):  the same, the mins through the halves' sums
//   iq4_nl: table values + 128, the dot started at the panel's -128 * sum
// Each output adds, per sub-block in order, the same float terms whatever the tile shape.
#include "simd.h"
#include "types.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "simd-vnni-target.h"
#include "simd-avx512-common.h"

namespace {

using namespace kvg;
using kvg::avx512::q4k_scales_mins;
using kvg::avx512::store_panel;

// How a type's sub-block dots become values (see the header).
enum kind { MINS32, OFFSET16, MINS16, TABLE128 };

// One decoded weight block of N values: quants, and scales with d folded in: per 32 values
// (sc[j], mn[j] = -dmin * min) or per 16 (sc[i], mn[i]).
template <int N> struct decoded {
    alignas(64) uint8_t q[N];
    float sc[N / 16];
    float mn[N / 16];
};

KVG_INLINE float half_at(const uint8_t * p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
KVG_INLINE __m256i load32(const uint8_t * p) { return _mm256_loadu_si256((const __m256i *) p); }
KVG_INLINE void store32(uint8_t * p, __m256i v) { _mm256_store_si256((__m256i *) p, v); }
KVG_INLINE __m256i low4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
KVG_INLINE __m256i high4(__m256i v) { return low4(_mm256_srli_epi16(v, 4)); }
// bits `shift`.. of each byte, under `mask`
KVG_INLINE __m256i field(__m256i v, int shift, char mask) { return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(mask)); }
// ... moved to bit 4
KVG_INLINE __m256i bits_to4(__m256i v, int shift, char mask) { return _mm256_slli_epi16(field(v, shift, mask), 4); }

// q4_K / q5_K: the 6-bit scales and mins of the 8 sub-blocks
KVG_INLINE void k4_scales(const uint8_t * b, float * sc, float * mn) {
    const __m512 dm = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(half_at(b))), _mm256_castps_pd(_mm256_set1_ps(-half_at(b + 2))), 1));
    const __m512 v = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(q4k_scales_mins((const char *) b))));
    _mm256_storeu_ps(sc, _mm512_castps512_ps256(v));
    _mm256_storeu_ps(mn, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

struct q4_k {
    static constexpr int N = QK_K;
    static constexpr size_t BYTES = sizeof(block_q4_K);
    static constexpr kind KIND = MINS32;
    static KVG_INLINE void decode(const uint8_t * b, decoded<N> & w) {
        k4_scales(b, w.sc, w.mn);
        for (int i = 0; i < 4; ++i) {
            const __m256i v = load32(b + 16 + 32 * i);
            store32(w.q + 64 * i, low4(v));
            store32(w.q + 64 * i + 32, high4(v));
        }
    }
};

struct q5_k {
    static constexpr int N = QK_K;
    static constexpr size_t BYTES = sizeof(block_q5_K);
    static constexpr kind KIND = MINS32;
    static KVG_INLINE void decode(const uint8_t * b, decoded<N> & w) {
        k4_scales(b, w.sc, w.mn);
        const __m256i h = load32(b + 16); // bit j of byte l: 5th bit of value 32 j + l
        for (int i = 0; i < 4; ++i) {
            const __m256i v = load32(b + 48 + 32 * i);
            store32(w.q + 64 * i, _mm256_or_si256(low4(v), bits_to4(h, 2 * i, 1)));
            store32(w.q + 64 * i + 32, _mm256_or_si256(high4(v), bits_to4(h, 2 * i + 1, 1)));
        }
    }
};

struct q6_k {
    static constexpr int N = QK_K;
    static constexpr size_t BYTES = sizeof(block_q6_K);
    static constexpr kind KIND = OFFSET16;
    static constexpr int OFFSET = 32;
    static KVG_INLINE void decode(const uint8_t * b, decoded<N> & w) {
        const float d = half_at(b + 208);
        _mm512_storeu_ps(w.sc, _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) (b + 192))))));
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = load32(b + 64 * h), l1 = load32(b + 64 * h + 32), qh = load32(b + 128 + 32 * h);
            uint8_t * q = w.q + 128 * h;
            store32(q, _mm256_or_si256(low4(l0), bits_to4(qh, 0, 3)));
            store32(q + 32, _mm256_or_si256(low4(l1), bits_to4(qh, 2, 3)));
            store32(q + 64, _mm256_or_si256(high4(l0), bits_to4(qh, 4, 3)));
            store32(q + 96, _mm256_or_si256(high4(l1), bits_to4(qh, 6, 3)));
        }
    }
};

// q2_K / q3_K: run t (32 values) of the 2-bit quants: bits 2 (t % 4) of qs[32 (t / 4) ..]
KVG_INLINE __m256i two_bits(const uint8_t * qs, int t) { return field(load32(qs + 32 * (t / 4)), 2 * (t % 4), 3); }

struct q2_k {
    static constexpr int N = QK_K;
    static constexpr size_t BYTES = sizeof(block_q2_K);
    static constexpr kind KIND = MINS16;
    static constexpr int OFFSET = 0;
    static KVG_INLINE void decode(const uint8_t * b, decoded<N> & w) {
        const float d = half_at(b + 80), dmin = half_at(b + 82);
        for (int i = 0; i < 16; ++i) {
            w.sc[i] = d * (float) (b[i] & 0x0F);
            w.mn[i] = -dmin * (float) (b[i] >> 4);
        }
        for (int t = 0; t < 8; ++t) store32(w.q + 32 * t, two_bits(b + 16, t));
    }
};

struct q3_k {
    static constexpr int N = QK_K;
    static constexpr size_t BYTES = sizeof(block_q3_K);
    static constexpr kind KIND = OFFSET16;
    static constexpr int OFFSET = 4;
    static KVG_INLINE void decode(const uint8_t * b, decoded<N> & w) {
        const float d = half_at(b + 108);
        const uint8_t * s = b + 96;
        for (int i = 0; i < 16; ++i) {
            const int low = (i < 8 ? s[i] : s[i - 8] >> 4) & 0x0F, high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
            w.sc[i] = d * (float) ((low | high << 4) - 32);
        }
        const __m256i hm = load32(b); // bit t of byte l: 3rd bit of value 32 t + l
        for (int t = 0; t < 8; ++t) store32(w.q + 32 * t, _mm256_or_si256(two_bits(b + 32, t), _mm256_slli_epi16(field(hm, t, 1), 2)));
    }
};

struct iq4_nl {
    static constexpr int N = 32;
    static constexpr size_t BYTES = sizeof(block_iq4_nl);
    static constexpr kind KIND = TABLE128;
    static KVG_INLINE void decode(const uint8_t * b, decoded<N> & w) {
        // the levels + 128 (1..241): unsigned, for vpdpbusd
        const __m128i levels = _mm512_castsi512_si128(kvg::avx512::iq4nl_table<128>());
        const __m128i v = _mm_loadu_si128((const __m128i *) (b + 2)), m = _mm_set1_epi8(0x0F);
        const __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
        store32(w.q, _mm256_set_m128i(_mm_shuffle_epi8(levels, hi), _mm_shuffle_epi8(levels, lo)));
        w.sc[0] = half_at(b);
    }
};

// What a 32-value sub-block of P panels gives every weight row: the activation quants, scales
// and the dots' starting values (or, for MINS32, the activation sums times the scales).
template <int P> struct sub_x {
    __m512i xv[P][8];
    __m512 xd[P];
    __m512i init[P][2]; // OFFSET16, MINS16: per half; TABLE128: [0]
    __m512 xsum[P];     // MINS32: xd * sum(x)
    __m512 hsum[P][2];  // MINS16: sum(x) of each half
};

template <kind K, int P>
KVG_INLINE void load_sub(const char * x, size_t x_stride, int offset, sub_x<P> & s) {
    for (int p = 0; p < P; ++p) {
        const char * xp = x + p * x_stride;
        for (int g = 0; g < 8; ++g) s.xv[p][g] = _mm512_load_si512((const void *) (xp + 64 * g));
        s.xd[p] = _mm512_load_ps((const float *) (xp + MM_PANEL_D));
        const __m512i c8 = _mm512_load_si512((const void *) (xp + MM_PANEL_C8)); // -8 * sum
        if (K == MINS32) s.xsum[p] = _mm512_mul_ps(_mm512_cvtepi32_ps(c8), _mm512_mul_ps(s.xd[p], _mm512_set1_ps(-0.125f)));
        if (K == TABLE128) s.init[p][0] = _mm512_load_si512((const void *) (xp + MM_PANEL_C128));
        if (K == OFFSET16 || K == MINS16) {
            const __m512i ones = _mm512_set1_epi8(1);
            __m512i lo = _mm512_setzero_si512();
            for (int g = 0; g < 4; ++g) lo = _mm512_dpbusd_epi32(lo, ones, s.xv[p][g]);
            const __m512i hi = _mm512_sub_epi32(_mm512_srai_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), c8), 3), lo);
            s.init[p][0] = _mm512_mullo_epi32(lo, _mm512_set1_epi32(-offset));
            s.init[p][1] = _mm512_mullo_epi32(hi, _mm512_set1_epi32(-offset));
            if (K == MINS16) s.hsum[p][0] = _mm512_cvtepi32_ps(lo), s.hsum[p][1] = _mm512_cvtepi32_ps(hi);
        }
    }
}

KVG_INLINE __m512i bcast4(const uint8_t * q) {
    int32_t v;
    std::memcpy(&v, q, 4);
    return _mm512_set1_epi32(v);
}

// acc[p] += the values of sub-block j of one decoded weight row times the panels' rows
template <class T, int P>
KVG_INLINE void sub_dot(const decoded<T::N> & w, int j, const sub_x<P> & s, __m512 * acc) {
    const uint8_t * q = w.q + 32 * j;
    if constexpr (T::KIND == OFFSET16 || T::KIND == MINS16) {
        __m512i lo[P], hi[P];
        for (int p = 0; p < P; ++p) lo[p] = s.init[p][0], hi[p] = s.init[p][1];
        for (int g = 0; g < 4; ++g) {
            const __m512i a = bcast4(q + 4 * g), b = bcast4(q + 16 + 4 * g);
            for (int p = 0; p < P; ++p) {
                lo[p] = _mm512_dpbusd_epi32(lo[p], a, s.xv[p][g]);
                hi[p] = _mm512_dpbusd_epi32(hi[p], b, s.xv[p][4 + g]);
            }
        }
        const __m512 sl = _mm512_set1_ps(w.sc[2 * j]), sh = _mm512_set1_ps(w.sc[2 * j + 1]);
        for (int p = 0; p < P; ++p) {
            __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[p]), sh, _mm512_mul_ps(_mm512_cvtepi32_ps(lo[p]), sl));
            if constexpr (T::KIND == MINS16) {
                t = _mm512_fmadd_ps(s.hsum[p][0], _mm512_set1_ps(w.mn[2 * j]), t);
                t = _mm512_fmadd_ps(s.hsum[p][1], _mm512_set1_ps(w.mn[2 * j + 1]), t);
            }
            acc[p] = _mm512_fmadd_ps(t, s.xd[p], acc[p]);
        }
    } else {
        __m512i d[P];
        for (int p = 0; p < P; ++p) d[p] = T::KIND == TABLE128 ? s.init[p][0] : _mm512_setzero_si512();
        for (int g = 0; g < 8; ++g) {
            const __m512i a = bcast4(q + 4 * g);
            for (int p = 0; p < P; ++p) d[p] = _mm512_dpbusd_epi32(d[p], a, s.xv[p][g]);
        }
        const __m512 sc = _mm512_set1_ps(w.sc[j]);
        for (int p = 0; p < P; ++p) {
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[p]), _mm512_mul_ps(sc, s.xd[p]), acc[p]);
            if (T::KIND == MINS32) acc[p] = _mm512_fmadd_ps(s.xsum[p], _mm512_set1_ps(w.mn[j]), acc[p]);
        }
    }
}

// rows [r0, r1) of super-block b into w
template <class T>
KVG_INLINE void decode_rows(const mm_tile_args & a, int64_t b, int r0, int r1, decoded<T::N> * w) {
    for (int r = r0; r < r1; ++r) T::decode((const uint8_t *) a.w + r * a.w_stride + b * T::BYTES, w[r]);
}

// R weight rows x P panels (x_stride bytes apart); n_cols counts the rows of all P panels.
template <class T, int R, int P>
KVG_INLINE void panel_tile(const mm_tile_args & a) {
    constexpr int SUBS = T::N / 32;
    int offset = 0;
    if constexpr (T::KIND == OFFSET16 || T::KIND == MINS16) offset = T::OFFSET;
    __m512 acc[R][P];
    for (int r = 0; r < R; ++r) for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    // Two sets of decoded rows: while sub-block j of super-block b runs, rows [j R / SUBS,
    // (j + 1) R / SUBS) of super-block b + 1 are decoded, so the decoding overlaps the dots
    // instead of stalling them once per super-block (Zen 4: iq4_nl 271 -> 322 GFLOP/s, q6_K
    // 220 -> 235, q3_K 222 -> 244).
    decoded<T::N> w[2][R];
    const int64_t nb = a.k / T::N;
    decode_rows<T>(a, 0, 0, R, w[0]);
    for (int64_t b = 0; b < nb; ++b) {
        for (int j = 0; j < SUBS; ++j) {
            sub_x<P> s;
            load_sub<T::KIND, P>(a.x + (b * SUBS + j) * MM_PANEL_BLOCK, a.x_stride, offset, s);
            for (int r = 0; r < R; ++r) sub_dot<T, P>(w[b & 1][r], j, s, acc[r]);
            if (b + 1 < nb) decode_rows<T>(a, b + 1, j * R / SUBS, (j + 1) * R / SUBS, w[(b + 1) & 1]);
        }
    }
    store_panel<R, P>(a, acc);
}

// GCC's unroll-and-jam (-O3) would run two sub-blocks per row: 32 activation registers, half
// of them spilled to the stack (Zen 4, 1 thread, K 2048 x N 5632 x M 128: q4_K 244 GFLOP/s
// with it, 255 without).
#if defined(__GNUC__) && !defined(__clang__)
#define KVG_NO_JAM __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define KVG_NO_JAM
#endif

template <class T> struct panel_of {
    template <int R> struct tile {
        static KVG_TARGET KVG_NO_JAM void run(const mm_tile_args & a) {
            if (a.n_cols > MM_PANEL_COLS) panel_tile<T, R, 2>(a);
            else panel_tile<T, R, 1>(a);
        }
    };
};

// panel[1..ROWS] of type T, from a full panel of rows (below it the q8_K tiles are as fast; not
// measured per type)
template <class T, int ROWS>
void fill(mm_kernel & k) {
    static_assert(ROWS <= MM_MAX_ROWS, "panel rows fit the table");
    mm_set_panels<panel_of<T>::template tile, ROWS>(k, MM_PANEL_COLS, MM_PANEL_Q8_0);
}

} // namespace

void kvg::add_panel_kernels_vnni(cpu_kernels & k) {
    // rows per tile: measured on Zen 4 (iq4_nl ~7% faster with 4; the k-quants the same)
    fill<q2_k, 8>(k.mm[MM_Q2_K]);
    fill<q3_k, 8>(k.mm[MM_Q3_K]);
    fill<q4_k, 8>(k.mm[MM_Q4_K]);
    fill<q5_k, 8>(k.mm[MM_Q5_K]);
    fill<q6_k, 8>(k.mm[MM_Q6_K]);
    fill<iq4_nl, 4>(k.mm[MM_IQ4_NL]);
}

#else
void kvg::add_panel_kernels_vnni(cpu_kernels &) {}
#endif
