// Decoding iq2_xxs, iq2_xs, iq2_s, iq1_s and iq1_m (layouts and value rules: quants-iq2.h).
// Each 32-value sub-block is 4 groups of 8 values: a grid point, 8 signs (iq2) or an offset
// (iq1), and the scale of the group's sub-block.
#include "quants-iq2.h"

#include <cstring>

namespace {

#include "quants-iq2-grids.inc"

// A packed table (2 bits per value) widened to 8 bytes per point: value j of a point is
// levels[code j].
template <size_t N> struct grid_table {
    uint64_t points[N];
    grid_table(const uint16_t * packed, const int8_t levels[3]) {
        for (size_t i = 0; i < N; ++i) {
            uint64_t p = 0;
            for (int j = 0; j < 8; ++j) p |= (uint64_t) (uint8_t) levels[(packed[i] >> (2 * j)) & 3] << (8 * j);
            points[i] = p;
        }
    }
};
constexpr int8_t IQ2_LEVELS[3] = {8, 25, 43};
constexpr int8_t IQ1_LEVELS[3] = {-1, 0, 1};
constexpr int8_t IQ1_LEVELS8[3] = {-8, 0, 8};

float h2f(ggml_fp16_t h) { return ggml_fp16_to_fp32(h); }
uint32_t u32_at(const uint8_t * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
uint16_t u16_at(const uint8_t * p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

// y[j] = scale * (+-value j of the point + delta); bit j of signs set: minus
void put8(float * y, uint64_t point, unsigned signs, float scale, float delta) {
    for (int j = 0; j < 8; ++j) {
        const float g = (float) (int8_t) (point >> (8 * j));
        y[j] = scale * ((signs >> j & 1 ? -g : g) + delta);
    }
}
// an iq2 sub-block scale: d (s + 1/2) / 4 = d (2 s + 1) / 8
float iq2_scale(float d, unsigned s) { return d * (0.5f + (float) s) * 0.25f; }
constexpr float IQ1_DELTA = 0.125f;

void row_iq2_xxs(const void * x, float * y, int64_t k) {
    const block_iq2_xxs * b = (const block_iq2_xxs *) x;
    const uint64_t * grid = kvg::iq2xxs_grid();
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = h2f(b->d);
        for (int j = 0; j < 8; ++j) {
            const uint8_t * q = (const uint8_t *) b->qs + 8 * j;
            const uint32_t aux = u32_at(q + 4);
            const float s = iq2_scale(d, aux >> 28);
            for (int l = 0; l < 4; ++l, y += 8) put8(y, grid[q[l]], kvg::iq2_signs(aux >> (7 * l)), s, 0.0f);
        }
    }
}

void row_iq2_xs(const void * x, float * y, int64_t k) {
    const block_iq2_xs * b = (const block_iq2_xs *) x;
    const uint64_t * grid = kvg::iq2xs_grid();
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = h2f(b->d);
        for (int j = 0; j < 8; ++j) {
            for (int l = 0; l < 4; ++l, y += 8) {
                const unsigned q = b->qs[4 * j + l];
                put8(y, grid[q & 511], kvg::iq2_signs(q >> 9), iq2_scale(d, (b->scales[j] >> (l / 2 * 4)) & 15), 0.0f);
            }
        }
    }
}

void row_iq2_s(const void * x, float * y, int64_t k) {
    const block_iq2_s * b = (const block_iq2_s *) x;
    const uint64_t * grid = kvg::iq2s_grid();
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = h2f(b->d);
        for (int j = 0; j < 8; ++j) {
            for (int l = 0; l < 4; ++l, y += 8) {
                const unsigned idx = b->qs[4 * j + l] | ((b->qh[j] >> (2 * l)) & 3) << 8;
                put8(y, grid[idx], b->qs[32 + 4 * j + l], iq2_scale(d, (b->scales[j] >> (l / 2 * 4)) & 15), 0.0f);
            }
        }
    }
}

void row_iq1_s(const void * x, float * y, int64_t k) {
    const block_iq1_s * b = (const block_iq1_s *) x;
    const uint64_t * grid = kvg::iq1s_grid();
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = h2f(b->d);
        for (int j = 0; j < 8; ++j) {
            const unsigned qh = b->qh[j];
            const float s = d * (float) (2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; ++l, y += 8)
                put8(y, grid[b->qs[4 * j + l] | ((qh >> (3 * l)) & 7) << 8], 0, s, delta);
        }
    }
}

void row_iq1_m(const void * x, float * y, int64_t k) {
    const block_iq1_m * b = (const block_iq1_m *) x;
    const uint64_t * grid = kvg::iq1s_grid();
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = h2f(kvg::iq1m_d(*b));
        for (int j = 0; j < 8; ++j) {
            const unsigned sc = u16_at(b->scales + 2 * (j / 2)) >> (6 * (j % 2));
            for (int l = 0; l < 4; ++l, y += 8) {
                const unsigned nib = b->qh[2 * j + l / 2] >> (4 * (l % 2));
                const float s = d * (float) (2 * ((sc >> (3 * (l / 2))) & 7) + 1);
                put8(y, grid[b->qs[4 * j + l] | (nib & 7) << 8], 0, s, nib & 8 ? -IQ1_DELTA : IQ1_DELTA);
            }
        }
    }
}

} // namespace

const uint64_t * kvg::iq2xxs_grid() {
    static const grid_table<256> t(IQ2XXS_PACKED, IQ2_LEVELS);
    return t.points;
}
const uint64_t * kvg::iq2xs_grid() {
    static const grid_table<512> t(IQ2XS_PACKED, IQ2_LEVELS);
    return t.points;
}
const uint64_t * kvg::iq2s_grid() {
    static const grid_table<1024> t(IQ2S_PACKED, IQ2_LEVELS);
    return t.points;
}
const uint64_t * kvg::iq1s_grid() {
    static const grid_table<2048> t(IQ1S_PACKED, IQ1_LEVELS);
    return t.points;
}
const uint64_t * kvg::iq1s_grid8() {
    static const grid_table<2048> t(IQ1S_PACKED, IQ1_LEVELS8);
    return t.points;
}

const kvg::block_type_info * kvg::iq2_block_types(int * n) {
    static const block_type_info types[] = {
        {GGML_TYPE_IQ2_XXS, "iq2_xxs", QK_K, sizeof(block_iq2_xxs), row_iq2_xxs, nullptr},
        {GGML_TYPE_IQ2_XS, "iq2_xs", QK_K, sizeof(block_iq2_xs), row_iq2_xs, nullptr},
        {GGML_TYPE_IQ2_S, "iq2_s", QK_K, sizeof(block_iq2_s), row_iq2_s, nullptr},
        {GGML_TYPE_IQ1_S, "iq1_s", QK_K, sizeof(block_iq1_s), row_iq1_s, nullptr},
        {GGML_TYPE_IQ1_M, "iq1_m", QK_K, sizeof(block_iq1_m), row_iq1_m, nullptr},
    };
    *n = (int) (sizeof(types) / sizeof(types[0]));
    return types;
}
