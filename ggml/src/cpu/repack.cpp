// ggml_kvg_repack / ggml_kvg_unrepack: q4_0 matrices to and from q4_0_r16 (types.h), in place,
// one group of 16 rows at a time through a buffer of one group.
#include "ggml-cpu.h"
#include "simd.h"
#include "types.h"

#include <cstring>
#include <vector>

namespace {

bool repackable(const ggml_tensor * t, ggml_type from) {
    return t && t->data && t->type == from && ggml_is_contiguous(t) && t->ne[1] % kvg::Q4_0_R16_ROWS == 0 &&
           t->ne[0] % kvg::MM_MV_GROUP == 0;
}

template <bool PACK>
void convert_groups(ggml_tensor * t) {
    const size_t row = t->nb[1], group = row * kvg::Q4_0_R16_ROWS;
    const int64_t n_groups = ggml_nrows(t) / kvg::Q4_0_R16_ROWS;
    std::vector<uint8_t> buf(group);
    for (int64_t g = 0; g < n_groups; ++g) {
        uint8_t * p = (uint8_t *) t->data + g * group;
        if (PACK) kvg::q4_0_r16_pack(p, row, buf.data(), t->ne[0]);
        else kvg::q4_0_r16_unpack(p, buf.data(), row, t->ne[0]);
        std::memcpy(p, buf.data(), group);
    }
}

} // namespace

bool ggml_kvg_repacks(ggml_type type) {
    return type == GGML_TYPE_Q4_0 && kvg::cpu_active_kernels().mm[kvg::MM_Q4_0_R16].mv != nullptr;
}

bool ggml_kvg_repack(ggml_tensor * t) {
    if (!repackable(t, GGML_TYPE_Q4_0) || !ggml_kvg_repacks(t->type)) return false;
    convert_groups<true>(t);
    t->type = GGML_TYPE_Q4_0_R16;
    return true;
}

bool ggml_kvg_unrepack(ggml_tensor * t) {
    if (!repackable(t, GGML_TYPE_Q4_0_R16)) return false;
    convert_groups<false>(t);
    t->type = GGML_TYPE_Q4_0;
    return true;
}
