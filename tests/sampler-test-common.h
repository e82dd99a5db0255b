// Helpers shared by the sampler tests.
#pragma once

#include <cstdint>
#include <vector>

// Logits from a separate generator (an LCG) so the test data does not depend on the code
// under test: n values uniform in [-scale, scale).
inline std::vector<float> random_logits(int n, uint32_t seed, float scale) {
    std::vector<float> v((size_t) n);
    uint32_t s = seed;
    for (float & x : v) {
        s = s * 1664525u + 1013904223u;
        x = ((float) (s >> 8) / 16777216.0f - 0.5f) * 2.0f * scale;
    }
    return v;
}
