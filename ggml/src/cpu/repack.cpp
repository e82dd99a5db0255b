// ggml_kvg_repack / ggml_kvg_unrepack: q4_0 and q8_0 matrices to and from their interleaved
// layouts (q4_0_r16, q8_0_r16: types.h), in place, one group of 16 rows at a time through a
// buffer of one group.
#include "ggml-cpu.h"
#include "simd.h"
#include "types.h"

#include <cstring>
#include <vector>

namespace {

bool fits(const ggml_tensor * t) {
    return t && t->data && ggml_is_contiguous(t) && t->ne[1] % kvg::R16_ROWS == 0 && t->ne[0] % kvg::MM_MV_GROUP == 0;
}

template <bool PACK>
void convert_groups(ggml_tensor * t, ggml_type plain) {
    const size_t row = t->nb[1], group = row * kvg::R16_ROWS;
    const int64_t n_groups = ggml_nrows(t) / kvg::R16_ROWS;
    std::vector<uint8_t> buf(group);
    for (int64_t g = 0; g < n_groups; ++g) {
        uint8_t * p = (uint8_t *) t->data + g * group;
        if (PACK) kvg::r16_pack(plain, p, row, buf.data(), t->ne[0]);
        else kvg::r16_unpack(plain, p, buf.data(), row, t->ne[0]);
        std::memcpy(p, buf.data(), group);
    }
}

} // namespace

bool ggml_kvg_repacks(ggml_type type) {
    const ggml_type r16 = kvg::r16_of(type);
    return r16 != type && kvg::cpu_active_kernels().mm[kvg::mm_type_of(r16)].mv != nullptr;
}

bool ggml_kvg_repack(ggml_tensor * t) {
    if (!fits(t) || !ggml_kvg_repacks(t->type)) return false;
    convert_groups<true>(t, t->type);
    t->type = kvg::r16_of(t->type);
    return true;
}

bool ggml_kvg_unrepack(ggml_tensor * t) {
    if (!fits(t) || !kvg::is_r16(t->type)) return false;
    const ggml_type plain = kvg::r16_plain(t->type);
    convert_groups<false>(t, plain);
    t->type = plain;
    return true;
}
