// What a loaded model must satisfy before it runs: hyperparameters that the graph can use,
// and weights without a non-finite value (a NaN in one weight would poison every logit).
#include "model-impl.h"

#include <cinttypes>
#include <cmath>
#include <cstring>
#include <vector>

namespace kvg {

bool check_hparams(const HParams & h, std::string * err) {
    if (h.n_embd <= 0 || h.n_head <= 0 || h.n_head_kv <= 0 || h.n_layer <= 0 || h.n_ff <= 0 || h.n_vocab <= 0 ||
        h.n_ctx_train <= 0) {
        return fail(err, strfmt("invalid hyperparameters: n_embd %d, n_head %d, n_head_kv %d, n_layer %d, n_ff %d, "
                                "n_vocab %d, n_ctx %d (all must be positive)",
                                h.n_embd, h.n_head, h.n_head_kv, h.n_layer, h.n_ff, h.n_vocab, h.n_ctx_train));
    }
    if (h.n_embd_head <= 0 && h.n_embd % h.n_head != 0) // without an explicit head size
        return fail(err, strfmt("n_embd %d is not a multiple of n_head %d", h.n_embd, h.n_head));
    if (h.n_head % h.n_head_kv != 0) {
        return fail(err, strfmt("n_head %d is not a multiple of n_head_kv %d", h.n_head, h.n_head_kv));
    }
    if (h.head_dim() % 2 != 0) return fail(err, strfmt("head size %d is odd (RoPE rotates pairs)", h.head_dim()));
    if (h.n_rot <= 0 || h.n_rot > h.head_dim() || h.n_rot % 2 != 0) {
        return fail(err, strfmt("rope dimension count %d must be even and in 1..%d", h.n_rot, h.head_dim()));
    }
    if (!(h.rms_eps > 0.0f) || !(h.rope_base > 0.0f) || !std::isfinite(h.rope_base)) {
        return fail(err, strfmt("invalid rms epsilon %g or rope base %g", h.rms_eps, h.rope_base));
    }
    return true;
}

// ---- weight data ----------------------------------------------------------------------------------

// "nan", "inf", "-inf" for a non-finite IEEE value given by its bits (f32, f16 and bf16
// differ only in the masks), nullptr if finite. Bits, not floats: no conversion per element.
static const char * non_finite(uint32_t bits, uint32_t exp_mask, uint32_t man_mask, uint32_t sign_mask) {
    if ((bits & exp_mask) != exp_mask) return nullptr;
    if (bits & man_mask) return "nan";
    return (bits & sign_mask) ? "-inf" : "inf";
}

// A decoded row of a block type; the error names the first block with a non-finite value.
static bool finite_row(const ggml_tensor * t, const uint8_t * row, int64_t r, std::string * err) {
    const int64_t ne0 = t->ne[0], blk = ggml_blck_size(t->type);
    std::vector<float> vals((size_t) ne0);
    ggml_get_type_traits(t->type)->to_float(row, vals.data(), ne0);
    for (int64_t i = 0; i < ne0; ++i) {
        if (std::isfinite(vals[(size_t) i])) continue;
        const int64_t b = i / blk;
        return fail(err, strfmt("tensor '%s' (%s): block %" PRId64 " decodes to a non-finite value (a scale is inf or "
                                "nan), elements %" PRId64 "..%" PRId64 " of row %" PRId64,
                                t->name, ggml_type_name(t->type), r * (ne0 / blk) + b, r * ne0 + b * blk,
                                r * ne0 + b * blk + blk - 1, r));
    }
    return true;
}

bool check_tensor_data(const Model & m, std::string * err) {
    for (const ggml_tensor * t : m.tensors()) {
        const int64_t ne0 = t->ne[0], n_rows = ggml_nrows(t);
        // row and column for matrices: a flat index alone is hard to place
        auto place = [&](int64_t row, const std::string & cols) {
            return n_rows > 1 ? strfmt(" (row %" PRId64 ", %s)", row, cols.c_str()) : std::string();
        };
        const char * bad = nullptr;
        for (int64_t r = 0; r < n_rows; ++r) {
            const uint8_t * row = (const uint8_t *) t->data + r * t->nb[1];
            if (t->type == GGML_TYPE_Q8_0 || t->type == GGML_TYPE_Q4_0) {
                // a block's values are integers; only its f16 scale d (the first 2 bytes) can be non-finite
                const int64_t blk = ggml_blck_size(t->type), n_blocks = ne0 / blk;
                const size_t bsize = ggml_type_size(t->type);
                for (int64_t b = 0; b < n_blocks; ++b) {
                    uint16_t d;
                    std::memcpy(&d, row + b * bsize, sizeof d);
                    if ((bad = non_finite(d, 0x7c00, 0x03ff, 0x8000))) {
                        const int64_t first = r * ne0 + b * blk;
                        return fail(
                            err,
                            strfmt(
                                "tensor '%s' (%s): block %" PRId64 " has a non-finite scale (%s), "
                                "elements %" PRId64 "..%" PRId64 "%s",
                                t->name, ggml_type_name(t->type), r * n_blocks + b, bad, first, first + blk - 1,
                                place(r, strfmt("columns %" PRId64 "..%" PRId64, b * blk, b * blk + blk - 1)).c_str()));
                    }
                }
                continue;
            }
            if (ggml_is_quantized(t->type)) {
                // other block types: a scale anywhere in the block can be non-finite; decode and look
                if (!finite_row(t, row, r, err)) return false;
                continue;
            }
            for (int64_t i = 0; i < ne0; ++i) {
                if (t->type == GGML_TYPE_F32) {
                    uint32_t x;
                    std::memcpy(&x, row + 4 * i, 4);
                    bad = non_finite(x, 0x7f800000u, 0x007fffffu, 0x80000000u);
                } else {
                    uint16_t x;
                    std::memcpy(&x, row + 2 * i, 2);
                    bad = t->type == GGML_TYPE_F16 ? non_finite(x, 0x7c00, 0x03ff, 0x8000)
                                                   : non_finite(x, 0x7f80, 0x007f, 0x8000); // bf16
                }
                if (bad) {
                    return fail(err,
                                strfmt("tensor '%s' holds a non-finite value (%s) at element %" PRId64 "%s", t->name,
                                       bad, r * ne0 + i, place(r, "column " + std::to_string(i)).c_str()));
                }
            }
        }
    }
    return true;
}

} // namespace kvg
