// IQ3_XXS and IQ3_S (quants-iq3.h): the grids, decoding, and encoders.
//
// Encoding. Signs are the values' own (iq3_xxs: where 8 values hold an odd count of negatives,
// the one with the least weighted magnitude takes the wrong sign, and its target becomes
// -|x|), so every value's target is a magnitude t, and the grid holds 4-tuples of magnitudes.
// Per sub-block of 32, candidate scales s (largest t near the top level, or on any level) each get every
// group's best grid entry, then the weighted least-squares scale for those entries; the lowest
// error wins. The 8 sub-block scales are then coded as D (2 l + 1) for a few candidate D (the
// f16 d), every group's entry is picked again for the scale actually stored, and the D with the
// lowest weighted squared error is kept.
//
// A group's best entry for a scale: each value's nearest of the 8 levels gives a combination
// of levels; when the grid holds it, that is the best entry; otherwise the entries within two
// squared level steps of the nearest entries to it (precomputed per combination) are tried.
#include "quants-iq3.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

// clang-format off
const uint32_t kvg::iq3xxs_grid[256] = {
    0x04040404, 0x04040414, 0x04040424, 0x04040c0c, 0x04040c1c, 0x04040c3e, 0x04041404, 0x04041414,
    0x04041c0c, 0x04042414, 0x04043e1c, 0x04043e2c, 0x040c040c, 0x040c041c, 0x040c0c04, 0x040c0c14,
    0x040c140c, 0x040c142c, 0x040c1c04, 0x040c1c14, 0x040c240c, 0x040c2c24, 0x040c3e04, 0x04140404,
    0x04140414, 0x04140424, 0x04140c0c, 0x04141404, 0x04141414, 0x04141c0c, 0x04141c1c, 0x04141c3e,
    0x04142c0c, 0x04142c3e, 0x04143e2c, 0x041c040c, 0x041c043e, 0x041c0c04, 0x041c0c14, 0x041c142c,
    0x041c3e04, 0x04240c1c, 0x04241c3e, 0x04242424, 0x04242c3e, 0x04243e1c, 0x04243e2c, 0x042c040c,
    0x042c043e, 0x042c1c14, 0x042c2c14, 0x04341c2c, 0x04343424, 0x043e0c04, 0x043e0c24, 0x043e0c34,
    0x043e241c, 0x043e340c, 0x0c04040c, 0x0c04041c, 0x0c040c04, 0x0c040c14, 0x0c04140c, 0x0c04141c,
    0x0c041c04, 0x0c041c14, 0x0c041c24, 0x0c04243e, 0x0c042c04, 0x0c0c0404, 0x0c0c0414, 0x0c0c0c0c,
    0x0c0c1404, 0x0c0c1414, 0x0c14040c, 0x0c14041c, 0x0c140c04, 0x0c140c14, 0x0c14140c, 0x0c141c04,
    0x0c143e14, 0x0c1c0404, 0x0c1c0414, 0x0c1c1404, 0x0c1c1c0c, 0x0c1c2434, 0x0c1c3434, 0x0c24040c,
    0x0c24042c, 0x0c242c04, 0x0c2c1404, 0x0c2c1424, 0x0c2c2434, 0x0c2c3e0c, 0x0c34042c, 0x0c3e1414,
    0x0c3e2404, 0x14040404, 0x14040414, 0x14040c0c, 0x14040c1c, 0x14041404, 0x14041414, 0x14041434,
    0x14041c0c, 0x14042414, 0x140c040c, 0x140c041c, 0x140c042c, 0x140c0c04, 0x140c0c14, 0x140c140c,
    0x140c1c04, 0x140c341c, 0x140c343e, 0x140c3e04, 0x14140404, 0x14140414, 0x14140c0c, 0x14140c3e,
    0x14141404, 0x14141414, 0x14141c3e, 0x14142404, 0x14142c2c, 0x141c040c, 0x141c0c04, 0x141c0c24,
    0x141c3e04, 0x141c3e24, 0x14241c2c, 0x14242c1c, 0x142c041c, 0x142c143e, 0x142c240c, 0x142c3e24,
    0x143e040c, 0x143e041c, 0x143e0c34, 0x143e242c, 0x1c04040c, 0x1c040c04, 0x1c040c14, 0x1c04140c,
    0x1c04141c, 0x1c042c04, 0x1c04342c, 0x1c043e14, 0x1c0c0404, 0x1c0c0414, 0x1c0c1404, 0x1c0c1c0c,
    0x1c0c2424, 0x1c0c2434, 0x1c14040c, 0x1c14041c, 0x1c140c04, 0x1c14142c, 0x1c142c14, 0x1c143e14,
    0x1c1c0c0c, 0x1c1c1c1c, 0x1c241c04, 0x1c24243e, 0x1c243e14, 0x1c2c0404, 0x1c2c0434, 0x1c2c1414,
    0x1c2c2c2c, 0x1c340c24, 0x1c341c34, 0x1c34341c, 0x1c3e1c1c, 0x1c3e3404, 0x24040424, 0x24040c3e,
    0x24041c2c, 0x24041c3e, 0x24042c1c, 0x24042c3e, 0x240c3e24, 0x24141404, 0x24141c3e, 0x24142404,
    0x24143404, 0x24143434, 0x241c043e, 0x241c242c, 0x24240424, 0x24242c0c, 0x24243424, 0x242c142c,
    0x242c241c, 0x242c3e04, 0x243e042c, 0x243e0c04, 0x243e0c14, 0x243e1c04, 0x2c040c14, 0x2c04240c,
    0x2c043e04, 0x2c0c0404, 0x2c0c0434, 0x2c0c1434, 0x2c0c2c2c, 0x2c140c24, 0x2c141c14, 0x2c143e14,
    0x2c1c0414, 0x2c1c2c1c, 0x2c240c04, 0x2c24141c, 0x2c24143e, 0x2c243e14, 0x2c2c0414, 0x2c2c1c0c,
    0x2c342c04, 0x2c3e1424, 0x2c3e2414, 0x34041424, 0x34042424, 0x34042434, 0x34043424, 0x340c140c,
    0x340c340c, 0x34140c3e, 0x34143424, 0x341c1c04, 0x341c1c34, 0x34242424, 0x342c042c, 0x342c2c14,
    0x34341c1c, 0x343e041c, 0x343e140c, 0x3e04041c, 0x3e04042c, 0x3e04043e, 0x3e040c04, 0x3e041c14,
    0x3e042c14, 0x3e0c1434, 0x3e0c2404, 0x3e140c14, 0x3e14242c, 0x3e142c14, 0x3e1c0404, 0x3e1c0c2c,
    0x3e1c1c1c, 0x3e1c3404, 0x3e24140c, 0x3e24240c, 0x3e2c0404, 0x3e2c0414, 0x3e2c1424, 0x3e341c04,
};
const uint32_t kvg::iq3s_grid[512] = {
    0x01010101, 0x01010103, 0x01010105, 0x0101010b, 0x0101010f, 0x01010301, 0x01010303, 0x01010305,
    0x01010309, 0x0101030d, 0x01010501, 0x01010503, 0x0101050b, 0x01010707, 0x01010901, 0x01010905,
    0x0101090b, 0x0101090f, 0x01010b03, 0x01010b07, 0x01010d01, 0x01010d05, 0x01010f03, 0x01010f09,
    0x01010f0f, 0x01030101, 0x01030103, 0x01030105, 0x01030109, 0x01030301, 0x01030303, 0x0103030b,
    0x01030501, 0x01030507, 0x0103050f, 0x01030703, 0x0103070b, 0x01030909, 0x01030d03, 0x01030d0b,
    0x01030f05, 0x01050101, 0x01050103, 0x0105010b, 0x0105010f, 0x01050301, 0x01050307, 0x0105030d,
    0x01050503, 0x0105050b, 0x01050701, 0x01050709, 0x01050905, 0x0105090b, 0x0105090f, 0x01050b03,
    0x01050b07, 0x01050f01, 0x01050f07, 0x01070107, 0x01070303, 0x0107030b, 0x01070501, 0x01070505,
    0x01070703, 0x01070707, 0x0107070d, 0x01070909, 0x01070b01, 0x01070b05, 0x01070d0f, 0x01070f03,
    0x01070f0b, 0x01090101, 0x01090307, 0x0109030f, 0x01090503, 0x01090509, 0x01090705, 0x01090901,
    0x01090907, 0x01090b03, 0x01090f01, 0x010b0105, 0x010b0109, 0x010b0501, 0x010b0505, 0x010b050d,
    0x010b0707, 0x010b0903, 0x010b090b, 0x010b090f, 0x010b0d0d, 0x010b0f07, 0x010d010d, 0x010d0303,
    0x010d0307, 0x010d0703, 0x010d0b05, 0x010d0f03, 0x010f0101, 0x010f0105, 0x010f0109, 0x010f0501,
    0x010f0505, 0x010f050d, 0x010f0707, 0x010f0b01, 0x010f0b09, 0x03010101, 0x03010103, 0x03010105,
    0x03010109, 0x03010301, 0x03010303, 0x03010307, 0x0301030b, 0x0301030f, 0x03010501, 0x03010505,
    0x03010703, 0x03010709, 0x0301070d, 0x03010b09, 0x03010b0d, 0x03010d03, 0x03010f05, 0x03030101,
    0x03030103, 0x03030107, 0x0303010d, 0x03030301, 0x03030309, 0x03030503, 0x03030701, 0x03030707,
    0x03030903, 0x03030b01, 0x03030b05, 0x03030f01, 0x03030f0d, 0x03050101, 0x03050305, 0x0305030b,
    0x0305030f, 0x03050501, 0x03050509, 0x03050705, 0x03050901, 0x03050907, 0x03050b0b, 0x03050d01,
    0x03050f05, 0x03070103, 0x03070109, 0x0307010f, 0x03070301, 0x03070307, 0x03070503, 0x0307050f,
    0x03070701, 0x03070709, 0x03070903, 0x03070d05, 0x03070f01, 0x03090107, 0x0309010b, 0x03090305,
    0x03090309, 0x03090703, 0x03090707, 0x03090905, 0x0309090d, 0x03090b01, 0x03090b09, 0x030b0103,
    0x030b0301, 0x030b0307, 0x030b0503, 0x030b0701, 0x030b0705, 0x030b0b03, 0x030d0501, 0x030d0509,
    0x030d050f, 0x030d0909, 0x030d090d, 0x030f0103, 0x030f0107, 0x030f0301, 0x030f0305, 0x030f0503,
    0x030f070b, 0x030f0903, 0x030f0d05, 0x030f0f01, 0x05010101, 0x05010103, 0x05010107, 0x0501010b,
    0x0501010f, 0x05010301, 0x05010305, 0x05010309, 0x0501030d, 0x05010503, 0x05010507, 0x0501050f,
    0x05010701, 0x05010705, 0x05010903, 0x05010907, 0x0501090b, 0x05010b01, 0x05010b05, 0x05010d0f,
    0x05010f01, 0x05010f07, 0x05010f0b, 0x05030101, 0x05030105, 0x05030301, 0x05030307, 0x0503030f,
    0x05030505, 0x0503050b, 0x05030703, 0x05030709, 0x05030905, 0x05030b03, 0x05050103, 0x05050109,
    0x0505010f, 0x05050503, 0x05050507, 0x05050701, 0x0505070f, 0x05050903, 0x05050b07, 0x05050b0f,
    0x05050f03, 0x05050f09, 0x05070101, 0x05070105, 0x0507010b, 0x05070303, 0x05070505, 0x05070509,
    0x05070703, 0x05070707, 0x05070905, 0x05070b01, 0x05070d0d, 0x05090103, 0x0509010f, 0x05090501,
    0x05090507, 0x05090705, 0x0509070b, 0x05090903, 0x05090f05, 0x05090f0b, 0x050b0109, 0x050b0303,
    0x050b0505, 0x050b070f, 0x050b0901, 0x050b0b07, 0x050b0f01, 0x050d0101, 0x050d0105, 0x050d010f,
    0x050d0503, 0x050d0b0b, 0x050d0d03, 0x050f010b, 0x050f0303, 0x050f050d, 0x050f0701, 0x050f0907,
    0x050f0b01, 0x07010105, 0x07010303, 0x07010307, 0x0701030b, 0x0701030f, 0x07010505, 0x07010703,
    0x07010707, 0x0701070b, 0x07010905, 0x07010909, 0x0701090f, 0x07010b03, 0x07010d07, 0x07010f03,
    0x07030103, 0x07030107, 0x0703010b, 0x07030309, 0x07030503, 0x07030507, 0x07030901, 0x07030d01,
    0x07030f05, 0x07030f0d, 0x07050101, 0x07050305, 0x07050501, 0x07050705, 0x07050709, 0x07050b01,
    0x07070103, 0x07070301, 0x07070309, 0x07070503, 0x07070507, 0x0707050f, 0x07070701, 0x07070903,
    0x07070907, 0x0707090f, 0x07070b0b, 0x07070f07, 0x07090107, 0x07090303, 0x0709030d, 0x07090505,
    0x07090703, 0x07090b05, 0x07090d01, 0x07090d09, 0x070b0103, 0x070b0301, 0x070b0305, 0x070b050b,
    0x070b0705, 0x070b0909, 0x070b0b0d, 0x070b0f07, 0x070d030d, 0x070d0903, 0x070f0103, 0x070f0107,
    0x070f0501, 0x070f0505, 0x070f070b, 0x09010101, 0x09010109, 0x09010305, 0x09010501, 0x09010509,
    0x0901050f, 0x09010705, 0x09010903, 0x09010b01, 0x09010f01, 0x09030105, 0x0903010f, 0x09030303,
    0x09030307, 0x09030505, 0x09030701, 0x0903070b, 0x09030907, 0x09030b03, 0x09030b0b, 0x09050103,
    0x09050107, 0x09050301, 0x0905030b, 0x09050503, 0x09050707, 0x09050901, 0x09050b0f, 0x09050d05,
    0x09050f01, 0x09070109, 0x09070303, 0x09070307, 0x09070501, 0x09070505, 0x09070703, 0x0907070b,
    0x09090101, 0x09090105, 0x09090509, 0x0909070f, 0x09090901, 0x09090f03, 0x090b010b, 0x090b010f,
    0x090b0503, 0x090b0d05, 0x090d0307, 0x090d0709, 0x090d0d01, 0x090f0301, 0x090f030b, 0x090f0701,
    0x090f0907, 0x090f0b03, 0x0b010105, 0x0b010301, 0x0b010309, 0x0b010505, 0x0b010901, 0x0b010909,
    0x0b01090f, 0x0b010b05, 0x0b010d0d, 0x0b010f09, 0x0b030103, 0x0b030107, 0x0b03010b, 0x0b030305,
    0x0b030503, 0x0b030705, 0x0b030f05, 0x0b050101, 0x0b050303, 0x0b050507, 0x0b050701, 0x0b05070d,
    0x0b050b07, 0x0b070105, 0x0b07010f, 0x0b070301, 0x0b07050f, 0x0b070909, 0x0b070b03, 0x0b070d0b,
    0x0b070f07, 0x0b090103, 0x0b090109, 0x0b090501, 0x0b090705, 0x0b09090d, 0x0b0b0305, 0x0b0b050d,
    0x0b0b0b03, 0x0b0b0b07, 0x0b0d0905, 0x0b0f0105, 0x0b0f0109, 0x0b0f0505, 0x0d010303, 0x0d010307,
    0x0d01030b, 0x0d010703, 0x0d010707, 0x0d010d01, 0x0d030101, 0x0d030501, 0x0d03050f, 0x0d030d09,
    0x0d050305, 0x0d050709, 0x0d050905, 0x0d050b0b, 0x0d050d05, 0x0d050f01, 0x0d070101, 0x0d070309,
    0x0d070503, 0x0d070901, 0x0d09050b, 0x0d090907, 0x0d090d05, 0x0d0b0101, 0x0d0b0107, 0x0d0b0709,
    0x0d0b0d01, 0x0d0d010b, 0x0d0d0901, 0x0d0f0303, 0x0d0f0307, 0x0f010101, 0x0f010109, 0x0f01010f,
    0x0f010501, 0x0f010505, 0x0f01070d, 0x0f010901, 0x0f010b09, 0x0f010d05, 0x0f030105, 0x0f030303,
    0x0f030509, 0x0f030907, 0x0f03090b, 0x0f050103, 0x0f050109, 0x0f050301, 0x0f05030d, 0x0f050503,
    0x0f050701, 0x0f050b03, 0x0f070105, 0x0f070705, 0x0f07070b, 0x0f070b07, 0x0f090103, 0x0f09010b,
    0x0f090307, 0x0f090501, 0x0f090b01, 0x0f0b0505, 0x0f0b0905, 0x0f0d0105, 0x0f0d0703, 0x0f0f0101,
};
// clang-format on

namespace {

using namespace kvg;

float f16_rounded(float x) { return ggml_fp16_to_fp32(ggml_fp32_to_fp16(x)); }
uint8_t grid_byte(uint32_t entry, int j) { return (uint8_t) (entry >> (8 * j)); }

// ---- decoding --------------------------------------------------------------------------------

// 8 values of group pair (g, g + 1) with one sign byte: db * magnitude * sign
void put8(const uint32_t * grid, int i0, int i1, uint8_t signs, float db, float * y) {
    for (int j = 0; j < 8; ++j) {
        const float mag = (float) grid_byte(grid[j < 4 ? i0 : i1], j % 4);
        y[j] = db * mag * (signs >> j & 1 ? -1.0f : 1.0f);
    }
}

} // namespace

void kvg::row_iq3_xxs(const void * x, float * y, int64_t k) {
    const block_iq3_xxs * b = (const block_iq3_xxs *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = ggml_fp16_to_fp32(b->d);
        for (int j = 0; j < 8; ++j) {
            uint32_t sas;
            std::memcpy(&sas, b->sas + 4 * j, 4);
            const float db = d * (float) (2 * (sas >> 28) + 1) * 0.25f;
            for (int l = 0; l < 4; ++l, y += 8) {
                const int g = 8 * j + 2 * l;
                put8(iq3xxs_grid, b->qs[g], b->qs[g + 1], iq3_signs.v[(sas >> (7 * l)) & 127], db, y);
            }
        }
    }
}

void kvg::row_iq3_s(const void * x, float * y, int64_t k) {
    const block_iq3_s * b = (const block_iq3_s *) x;
    for (int64_t i = 0; i < k / QK_K; ++i, ++b) {
        const float d = ggml_fp16_to_fp32(b->d);
        for (int j = 0; j < 8; ++j) {
            const float db = d * (float) (1 + 2 * ((b->scales[j / 2] >> (4 * (j % 2))) & 15));
            for (int l = 0; l < 4; ++l, y += 8) {
                const int g = 8 * j + 2 * l;
                put8(iq3s_grid, iq3s_index(*b, g), iq3s_index(*b, g + 1), b->signs[4 * j + l], db, y);
            }
        }
    }
}

// ---- encoding --------------------------------------------------------------------------------
namespace {

// Search aids of one grid (see the top of the file). Combination code: level index of value j
// in bits 3 j .. 3 j + 2.
struct grid_search {
    const uint32_t * grid;
    float level[8];
    int16_t exact[4096];        // the entry holding the combination, or -1
    std::vector<uint32_t> from; // entries to try for combination c: cand[from[c] .. from[c + 1])
    std::vector<uint16_t> cand;

    grid_search(const uint32_t * g, int n, const uint8_t (&lv)[8]) : grid(g), from(4097, 0) {
        for (int l = 0; l < 8; ++l) level[l] = lv[l];
        std::fill(exact, exact + 4096, (int16_t) -1);
        for (int i = 0; i < n; ++i) {
            int c = 0;
            for (int j = 0; j < 4; ++j) c |= (int) (std::find(lv, lv + 8, grid_byte(g[i], j)) - lv) << (3 * j);
            exact[c] = (int16_t) i;
        }
        const int step2 = (lv[1] - lv[0]) * (lv[1] - lv[0]);
        std::vector<int> dist(n);
        for (int c = 0; c < 4096; ++c) {
            if (exact[c] < 0) {
                for (int i = 0; i < n; ++i) {
                    dist[i] = 0;
                    for (int j = 0; j < 4; ++j) {
                        const int e = lv[(c >> (3 * j)) & 7] - grid_byte(g[i], j);
                        dist[i] += e * e;
                    }
                }
                const int dmin = *std::min_element(dist.begin(), dist.end());
                for (int i = 0; i < n; ++i)
                    if (dist[i] <= dmin + 2 * step2) cand.push_back((uint16_t) i);
            }
            from[c + 1] = (uint32_t) cand.size();
        }
    }

    int nearest_level(float v) const {
        int best = 0;
        for (int l = 1; l < 8; ++l)
            if (std::fabs(v - level[l]) < std::fabs(v - level[best])) best = l;
        return best;
    }
    float error(int i, const float * t, const float * w, float s) const {
        float e = 0.0f;
        for (int j = 0; j < 4; ++j) {
            const float r = t[j] - s * (float) grid_byte(grid[i], j);
            e += w[j] * r * r;
        }
        return e;
    }
    // the entry with the least weighted error for targets t[4] at scale s > 0
    int pick(const float * t, const float * w, float s) const {
        int c = 0;
        for (int j = 0; j < 4; ++j) c |= nearest_level(t[j] / s) << (3 * j);
        if (exact[c] >= 0) return exact[c];
        int best = cand[from[c]];
        float best_e = error(best, t, w, s);
        for (uint32_t k = from[c] + 1; k < from[c + 1]; ++k) {
            const float e = error(cand[k], t, w, s);
            if (e < best_e) best_e = e, best = cand[k];
        }
        return best;
    }
};

const grid_search & xxs_search() {
    static const uint8_t levels[8] = {4, 12, 20, 28, 36, 44, 52, 62};
    static const grid_search g(iq3xxs_grid, 256, levels);
    return g;
}
const grid_search & s_search() {
    static const uint8_t levels[8] = {1, 3, 5, 7, 9, 11, 13, 15};
    static const grid_search g(iq3s_grid, 512, levels);
    return g;
}

// Picks the 8 groups' entries of a sub-block at scale s; returns the weighted squared error
// and the sums of w t g and w g g (for the least-squares scale of those entries).
float pick_sub(const grid_search & G, const float * t, const float * w, float s, uint16_t * idx, double * sxg = nullptr,
               double * sgg = nullptr) {
    float err = 0.0f;
    double xg = 0, gg = 0;
    for (int q = 0; q < 8; ++q) {
        idx[q] = (uint16_t) G.pick(t + 4 * q, w + 4 * q, s);
        err += G.error(idx[q], t + 4 * q, w + 4 * q, s);
        for (int j = 0; j < 4; ++j) {
            const double g = grid_byte(G.grid[idx[q]], j);
            xg += w[4 * q + j] * t[4 * q + j] * g;
            gg += w[4 * q + j] * g * g;
        }
    }
    if (sxg) *sxg = xg, *sgg = gg;
    return err;
}

// The best real scale of a sub-block (0 when nothing in it counts)
float fit_sub(const grid_search & G, const float * t, const float * w) {
    float amax = 0.0f;
    double wtt = 0;
    for (int i = 0; i < 32; ++i) {
        amax = std::max(amax, t[i]);
        wtt += w[i] * t[i] * t[i];
    }
    if (!(amax > 0.0f) || !(wtt > 0)) return 0.0f;
    double best_err = wtt, best_s = 0;
    uint16_t idx[8];
    // around amax on the top level, then amax on each level (a run of equal values is exact)
    for (int k = 0; k < 24; ++k) {
        const float s = k < 16 ? amax * (0.7f + 0.04f * (float) k) / G.level[7] : amax / G.level[k - 16];
        double xg, gg;
        pick_sub(G, t, w, s, idx, &xg, &gg);
        if (gg > 0 && xg > 0 && wtt - xg * xg / gg < best_err) best_err = wtt - xg * xg / gg, best_s = xg / gg;
    }
    return (float) best_s;
}

// The stored d for the chosen codes that makes the error orthogonal to x (sum w x (x - x') = 0)
// rather than to x': least squares shrinks x' by the whole squared error along x, and at 3 bits
// dot products with activations that follow the weights come out short by several percent
// (ggml's test-quantize-fns' dot check). Costs about 2% more squared error.
float unbiased(const grid_search & G, const float * t, const float * w, float div, const uint8_t * l,
               const uint16_t * idx, float d) {
    double tt = 0, tu = 0;
    for (int i = 0; i < QK_K; ++i) {
        const double u = (2 * l[i / 32] + 1) * (double) grid_byte(G.grid[idx[i / 4]], i % 4);
        tt += w[i] * t[i] * t[i];
        tu += w[i] * t[i] * u;
    }
    const float d_unbiased = f16_rounded((float) (tt / tu * div));
    return tu > 0 && std::isfinite(d_unbiased) ? d_unbiased : d;
}

// Codes a super-block of targets t (weights w) as d / div * (2 l_j + 1) * grid entries idx;
// returns the stored d (f16-exact), l[8] and idx[64].
float fit_block(const grid_search & G, const float * t, const float * w, float div, uint8_t * l, uint16_t * idx) {
    float s[8], smax = 0.0f;
    for (int j = 0; j < 8; ++j) smax = std::max(smax, s[j] = fit_sub(G, t + 32 * j, w + 32 * j));
    std::fill(l, l + 8, (uint8_t) 0);
    std::fill(idx, idx + 64, (uint16_t) 0);
    float best_d = 0.0f, best_err = INFINITY;
    if (!(smax > 0.0f)) return 0.0f;
    for (float f : {0.88f, 0.92f, 0.96f, 1.0f}) {
        const float d = f16_rounded(smax * f / 31.0f * div), D = d / div;
        if (!(D > 0.0f) || !std::isfinite(d)) continue;
        uint8_t lc[8];
        uint16_t ic[64];
        float err = 0.0f;
        for (int j = 0; j < 8; ++j) {
            lc[j] = (uint8_t) std::clamp((int) std::lround((s[j] / D - 1.0f) / 2.0f), 0, 15);
            err += pick_sub(G, t + 32 * j, w + 32 * j, D * (float) (2 * lc[j] + 1), ic + 8 * j);
        }
        if (err < best_err) {
            best_err = err, best_d = d;
            std::copy(lc, lc + 8, l);
            std::copy(ic, ic + 64, idx);
        }
    }
    return unbiased(G, t, w, div, l, idx, best_d);
}

// |x| (0 for NaN and infinities), the sign bits of 8 values at a time, and the weights
void magnitudes(const float * x, const float * w, float * t, float * wt, uint8_t * neg) {
    for (int i = 0; i < QK_K; ++i) {
        const float a = std::fabs(x[i]);
        t[i] = a < INFINITY ? a : 0.0f;
        wt[i] = w ? w[i] : 1.0f;
        if (i % 8 == 0) neg[i / 8] = 0;
        if (x[i] < 0.0f && t[i] > 0.0f) neg[i / 8] |= (uint8_t) (1 << (i % 8));
    }
}

void block_iq3_xxs_of(const float * x, const float * w, block_iq3_xxs * b) {
    float t[QK_K], wt[QK_K];
    uint8_t neg[32];
    magnitudes(x, w, t, wt, neg);
    for (int c = 0; c < 32; ++c) {
        if (iq3_signs.v[neg[c] & 127] == neg[c]) continue; // even count of negatives
        int flip = 8 * c;
        for (int i = 8 * c + 1; i < 8 * c + 8; ++i)
            if (wt[i] * t[i] < wt[flip] * t[flip]) flip = i;
        neg[c] ^= (uint8_t) (1 << (flip % 8));
        t[flip] = -t[flip];
    }
    uint8_t l[8];
    uint16_t idx[64];
    b->d = ggml_fp32_to_fp16(fit_block(xxs_search(), t, wt, 4.0f, l, idx));
    for (int g = 0; g < 64; ++g) b->qs[g] = (uint8_t) idx[g];
    for (int j = 0; j < 8; ++j) {
        uint32_t sas = (uint32_t) l[j] << 28;
        for (int q = 0; q < 4; ++q) sas |= (uint32_t) (neg[4 * j + q] & 127) << (7 * q);
        std::memcpy(b->sas + 4 * j, &sas, 4);
    }
}

void block_iq3_s_of(const float * x, const float * w, block_iq3_s * b) {
    float t[QK_K], wt[QK_K];
    magnitudes(x, w, t, wt, b->signs);
    uint8_t l[8];
    uint16_t idx[64];
    b->d = ggml_fp32_to_fp16(fit_block(s_search(), t, wt, 1.0f, l, idx));
    std::memset(b->qh, 0, sizeof b->qh);
    std::memset(b->scales, 0, sizeof b->scales);
    for (int g = 0; g < 64; ++g) {
        b->qs[g] = (uint8_t) idx[g];
        b->qh[g / 8] |= (uint8_t) ((idx[g] >> 8) << (g % 8));
    }
    for (int j = 0; j < 8; ++j) b->scales[j / 2] |= (uint8_t) (l[j] << (4 * (j % 2)));
}

} // namespace

void kvg::encode_iq3_xxs(const float * x, void * y, int64_t k, const float * w) {
    GGML_ASSERT(k % QK_K == 0);
    for (int64_t i = 0; i < k / QK_K; ++i)
        block_iq3_xxs_of(x + i * QK_K, w ? w + i * QK_K : nullptr, (block_iq3_xxs *) y + i);
}
void kvg::encode_iq3_s(const float * x, void * y, int64_t k, const float * w) {
    GGML_ASSERT(k % QK_K == 0);
    for (int64_t i = 0; i < k / QK_K; ++i)
        block_iq3_s_of(x + i * QK_K, w ? w + i * QK_K : nullptr, (block_iq3_s *) y + i);
}
