// q4_0_r16, q8_0_r16, q4_K_r16, q6_K_r16, iq4_nl_r16 and q5_0_r16 (matrices of those types with rows
// interleaved by 16, ggml_kvg_repack): the
// layout, the round trip, and ggml_mul_mat over them on every path (their matrix-vector and
// panel kernels where a path has them, unpacked rows elsewhere) against a double-precision loop
// over the original rows.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "ops-common.h"
#include "test-common.h"

#include "ggml.h"
#include "gguf.h"
#include "kvgraph.h"
#include "ggml-cpu.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "types.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace {

std::mt19937 rng(77);
float frand() { return std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng); }

ggml_tensor * random_tensor(ggml_context * ctx, ggml_type t, int64_t K, int64_t N) {
    ggml_tensor * x = ggml_new_tensor_2d(ctx, t, K, N);
    std::vector<float> row(K);
    for (int64_t r = 0; r < N; ++r) {
        for (auto & v : row) v = frand();
        if (t == GGML_TYPE_F32) std::memcpy((char *) x->data + r * x->nb[1], row.data(), K * sizeof(float));
        else ggml_get_type_traits(t)->from_float_ref(row.data(), (char *) x->data + r * x->nb[1], K);
    }
    return x;
}

const ggml_type PLAIN_TYPES[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0,   GGML_TYPE_Q4_K,
                                 GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_0};

ggml_type interleaved(ggml_type plain) {
    switch (plain) {
        case GGML_TYPE_Q4_0: return GGML_TYPE_Q4_0_R16;
        case GGML_TYPE_Q8_0: return GGML_TYPE_Q8_0_R16;
        case GGML_TYPE_Q4_K: return GGML_TYPE_Q4_K_R16;
        case GGML_TYPE_Q6_K: return GGML_TYPE_Q6_K_R16;
        case GGML_TYPE_Q5_0: return GGML_TYPE_Q5_0_R16;
        default: return GGML_TYPE_IQ4_NL_R16;
    }
}
bool k_quant(ggml_type plain) { return plain == GGML_TYPE_Q4_K || plain == GGML_TYPE_Q6_K; }

// q4_K's 6-bit scale and min of sub-block j from its 12 bytes (ggml's layout: j < 4 in the low 6
// bits of bytes j and j + 4; j >= 4 in the nibbles of byte j + 4 and the top 2 bits of j - 4, j)
void q4k_scale_min(const uint8_t * p, int j, int & sc, int & mn) {
    const int lo = p[j < 4 ? j : j + 4];
    sc = j < 4 ? lo & 63 : (lo & 15) | (p[j - 4] >> 6) << 4;
    mn = j < 4 ? p[j + 4] & 63 : (lo >> 4) | (p[j] >> 6) << 4;
}

// Group block bytes of 16 q4_K super-blocks (blk[r]: row r's), from types.h's description.
void interleave_q4_k(const uint8_t * const blk[16], uint8_t * out) {
    for (int r = 0; r < 16; ++r) {
        std::memcpy(out + 2 * r, blk[r], 2);           // d
        std::memcpy(out + 32 + 2 * r, blk[r] + 2, 2);  // dmin
        int sc[8], mn[8];
        for (int j = 0; j < 8; ++j) q4k_scale_min(blk[r] + 4, j, sc[j], mn[j]);
        uint8_t * col = out + 64 + r;
        for (int j = 0; j < 8; ++j) col[16 * j] = (uint8_t) (sc[j] + 64 * (mn[j] % 4));
        for (int i = 0; i < 4; ++i) col[16 * (8 + i)] = (uint8_t) (mn[2 * i] / 4 + 16 * (mn[2 * i + 1] / 4));
        for (int j = 0; j < 128; ++j) out[256 + 64 * (j / 4) + 4 * r + j % 4] = blk[r][16 + j];
    }
}

// ... of 16 q6_K super-blocks: d (bytes 208-209), scales (192-207), then per half h and k < 8
// the words of qh (bytes 128..191) 8h + k, of ql (0..127) 16h + k and 16h + 8 + k
void interleave_q6_k(const uint8_t * const blk[16], uint8_t * out) {
    for (int r = 0; r < 16; ++r) {
        std::memcpy(out + 2 * r, blk[r] + 208, 2);
        for (int i = 0; i < 16; ++i) out[32 + 16 * i + r] = blk[r][192 + i];
        int slot = 0;
        for (int h = 0; h < 2; ++h)
            for (int k = 0; k < 8; ++k)
                for (int src : {128 + 4 * (8 * h + k), 4 * (16 * h + k), 4 * (16 * h + 8 + k)}) {
                    std::memcpy(out + 288 + 64 * slot + 4 * r, blk[r] + src, 4);
                    ++slot;
                }
    }
}

// q5_0_r16's 5th bits of one row from q5_0's (bit v: value v), bit by bit from types.h: byte i,
// for j < 4, bit 4 + j for value 4j + i and bit j for value 16 + 4j + i
void interleave_q5_bits(const uint8_t * qh, uint8_t * out) {
    for (int i = 0; i < 4; ++i) {
        out[i] = 0;
        for (int j = 0; j < 4; ++j) {
            const int lo = 4 * j + i, hi = 16 + 4 * j + i;
            out[i] |= (uint8_t) (((qh[lo / 8] >> (lo % 8)) & 1) << (4 + j));
            out[i] |= (uint8_t) (((qh[hi / 8] >> (hi % 8)) & 1) << j);
        }
    }
}

// An interleaved copy of a q4_0, q8_0, q4_K, q6_K, iq4_nl or q5_0 matrix, written here from the layout's
// description (types.h; iq4_nl's block is q4_0's, q5_0's adds the 5th bits after the scales).
ggml_tensor * interleaved_copy(ggml_context * ctx, const ggml_tensor * q) {
    ggml_tensor * t = ggml_new_tensor_2d(ctx, interleaved(q->type), q->ne[0], q->ne[1]);
    REQUIRE(t->nb[1] == q->nb[1]);
    const int64_t nb = q->ne[0] / ggml_blck_size(q->type);
    const bool q5 = q->type == GGML_TYPE_Q5_0;
    const size_t bb = ggml_type_size(q->type), qs = q5 ? 16 : bb - 2; // 18 / 34 / 22 bytes, 16 / 32 / 16 of quants
    const size_t head = q5 ? 96 : 32, qs_at = bb - qs;                // the group's quants, a row's
    if (k_quant(q->type)) {
        for (int64_t g = 0; g < q->ne[1] / 16; ++g) {
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t * blk[16];
                for (int r = 0; r < 16; ++r) blk[r] = (const uint8_t *) q->data + (g * 16 + r) * q->nb[1] + b * bb;
                uint8_t * out = (uint8_t *) t->data + g * 16 * t->nb[1] + b * 16 * bb;
                if (q->type == GGML_TYPE_Q4_K) interleave_q4_k(blk, out);
                else interleave_q6_k(blk, out);
            }
        }
        return t;
    }
    for (int64_t g = 0; g < q->ne[1] / 16; ++g) {
        uint8_t * out = (uint8_t *) t->data + g * 16 * t->nb[1];
        for (int64_t b = 0; b < nb; ++b, out += 16 * bb) {
            for (int r = 0; r < 16; ++r) {
                const uint8_t * blk = (const uint8_t *) q->data + (g * 16 + r) * q->nb[1] + b * bb;
                out[2 * r] = blk[0];
                out[2 * r + 1] = blk[1];
                if (q5) interleave_q5_bits(blk + 2, out + 32 + 4 * r);
                for (size_t j = 0; j < qs; ++j) out[head + 64 * (j / 4) + 4 * r + j % 4] = blk[qs_at + j];
            }
        }
    }
    return t;
}

// dst[n, m] in double over the rows of w and the activation rows rounded through the type the
// path in use quantizes them to for w's type (q8_0; q8_K for the k-quants outside panel tiles).
std::vector<double> reference(const ggml_tensor * w, const ggml_tensor * x, std::vector<double> * mag) {
    const int64_t K = w->ne[0];
    std::vector<float> wr(K), xr(K);
    const ggml_type vdt = kvg::mm_activation_type(w->type, x->ne[1], K);
    std::vector<uint8_t> xq(ggml_row_size(vdt, K));
    std::vector<double> out;
    for (int64_t m = 0; m < x->ne[1]; ++m) {
        ggml_get_type_traits(vdt)->from_float_ref((const float *) ((const char *) x->data + m * x->nb[1]), xq.data(), K);
        ggml_get_type_traits(vdt)->to_float(xq.data(), xr.data(), K);
        for (int64_t n = 0; n < w->ne[1]; ++n) {
            ggml_get_type_traits(w->type)->to_float((const char *) w->data + n * w->nb[1], wr.data(), K);
            double s = 0, a = 0;
            for (int64_t k = 0; k < K; ++k) {
                s += (double) wr[k] * xr[k];
                a += std::fabs((double) wr[k] * xr[k]);
            }
            out.push_back(s);
            mag->push_back(a);
        }
    }
    return out;
}

std::vector<float> run(ggml_tensor * node, int nth) {
    std::vector<uint8_t> work(ggml_mul_mat_work_size(node, nth) + 1);
    std::memset(node->data, 0xff, ggml_nbytes(node)); // NaN: unwritten outputs show up
    for (int ph = 0; ph < ggml_mul_mat_n_phases(node); ++ph) {
        for (int ith = 0; ith < nth; ++ith) {
            ggml_compute_params p = {ith, nth, ph, work.data(), work.size()};
            ggml_compute_forward_mul_mat(&p, node);
        }
    }
    const float * d = (const float *) node->data;
    return std::vector<float>(d, d + ggml_nelements(node));
}

// K x N weights of type plain times M rows, as they are and interleaved, on every path and task count.
void check_product(ggml_type plain, int64_t K, int64_t N, int64_t M) {
    CAPTURE(K); CAPTURE(N); CAPTURE(M);
    const std::string type = ggml_type_name(plain);
    CAPTURE(type);
    Ctx c;
    ggml_tensor * w = random_tensor(c.ctx, plain, K, N);
    ggml_tensor * w16 = interleaved_copy(c.ctx, w);
    ggml_tensor * x = random_tensor(c.ctx, GGML_TYPE_F32, K, M);
    ggml_tensor * direct = ggml_mul_mat(c.ctx, w, x), * inter = ggml_mul_mat(c.ctx, w16, x);
    for (ggml_cpu_features path : available_paths()) {
        ggml_cpu_set_features_limit(path);
        CAPTURE(path);
        std::vector<double> mag;
        const std::vector<double> ref = reference(w, x, &mag);
        const std::vector<float> want = run(direct, 1), got = run(inter, 1);
        int bad = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            if (!(std::fabs(got[i] - ref[i]) <= 2e-5 * mag[i] + 1e-6) && bad++ < 5) {
                FAIL_CHECK("element " << i << ": got " << got[i] << " want " << ref[i]);
            }
        }
        CHECK(bad == 0);
        // except for the matrix-vector kernel (blocks summed in another order; up to its mv_max
        // activation rows, below the panels), the plain type's bits
        const kvg::mm_kernel & own = kvg::cpu_active_kernels().mm[kvg::mm_type_of(interleaved(plain))];
        const bool own_kernel =
            M <= std::max(1, own.mv_max) && K % 128 == 0 && own.mv && !(own.panel_rows > 0 && M >= own.panel_min);
        if (!own_kernel) CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        for (int nth = 2; nth <= 3; ++nth) CHECK(std::memcmp(run(inter, nth).data(), got.data(), got.size() * sizeof(float)) == 0);
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}

} // namespace

TEST_CASE("the r16 types: the library's interleaving is the layout types.h describes, and unpacks back") {
    for (ggml_type plain : PLAIN_TYPES) {
        Ctx c;
        ggml_tensor * w = random_tensor(c.ctx, plain, 512, 32);
        const ggml_tensor * want = interleaved_copy(c.ctx, w);
        std::vector<uint8_t> got(ggml_nbytes(w)), back(ggml_nbytes(w));
        const size_t group = 16 * w->nb[1];
        for (int g = 0; g < 2; ++g) kvg::r16_pack(plain, (const char *) w->data + g * group, w->nb[1], got.data() + g * group, 512);
        CHECK(std::memcmp(got.data(), want->data, got.size()) == 0);
        for (int g = 0; g < 2; ++g) kvg::r16_unpack(plain, got.data() + g * group, back.data() + g * group, w->nb[1], 512);
        CHECK(std::memcmp(back.data(), w->data, back.size()) == 0);
    }
}

TEST_CASE("ggml_kvg_repack: only where the path has the kernel, only fitting matrices; ggml_kvg_unrepack restores the bytes") {
    for (ggml_type plain : PLAIN_TYPES) {
        const std::string type = ggml_type_name(plain);
        CAPTURE(type);
        Ctx c;
        const int64_t K = k_quant(plain) ? 512 : 384;
        ggml_tensor * w = random_tensor(c.ctx, plain, K, 48);
        const std::vector<uint8_t> orig((uint8_t *) w->data, (uint8_t *) w->data + ggml_nbytes(w));
        for (ggml_cpu_features path : available_paths()) {
            ggml_cpu_set_features_limit(path);
            CAPTURE(path);
            const bool has = kvg::cpu_active_kernels().mm[kvg::mm_type_of(interleaved(plain))].mv != nullptr;
            // AVX2: q4_0's (several activation rows of a batch at once); q5_0's on the AVX2 path only
            const bool avx2 = plain == GGML_TYPE_Q4_0 ? path >= GGML_CPU_FEATURES_AVX2 : path == GGML_CPU_FEATURES_AVX2;
            const bool vnni = path >= GGML_CPU_FEATURES_AVX512_VNNI && plain != GGML_TYPE_Q5_0;
            CHECK(has == (vnni || ((plain == GGML_TYPE_Q4_0 || plain == GGML_TYPE_Q5_0) && avx2)));
            CHECK(ggml_kvg_repacks(plain) == has);
            REQUIRE(ggml_kvg_repack(w) == has);
            CHECK(w->type == (has ? interleaved(plain) : plain));
            if (!has) continue;
            CHECK(std::memcmp(w->data, orig.data(), orig.size()) != 0);
            CHECK_FALSE(ggml_kvg_repack(w)); // already interleaved
            REQUIRE(ggml_kvg_unrepack(w));
            CHECK(w->type == plain);
            CHECK(std::memcmp(w->data, orig.data(), orig.size()) == 0);
        }
        ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
        if (ggml_kvg_repacks(plain)) {
            CHECK_FALSE(ggml_kvg_repack(random_tensor(c.ctx, plain, K, 40)));  // rows not a multiple of 16
            if (!k_quant(plain)) CHECK_FALSE(ggml_kvg_repack(random_tensor(c.ctx, plain, 352, 48)));  // K not a multiple of 128
            ggml_tensor * v = random_tensor(c.ctx, plain, K, 64);
            CHECK_FALSE(ggml_kvg_repack(ggml_view_2d(c.ctx, v, 256, 64, v->nb[1], 0))); // not contiguous
        }
    }
    CHECK_FALSE(ggml_kvg_repacks(GGML_TYPE_F32));
    CHECK_FALSE(ggml_kvg_repacks(GGML_TYPE_Q5_K));
}

TEST_CASE("mul_mat: interleaved weights against their plain rows on every path (matrix-vector, tiles, panels)") {
    for (ggml_type plain : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_0}) {
        for (int64_t K : {128, 384, 2048}) check_product(plain, K, 48, 1);
        check_product(plain, 96, 32, 1);    // K not a multiple of 128: unpacked rows
        check_product(plain, 256, 64, 3);   // tiles over unpacked rows
        check_product(plain, 256, 80, 20);  // panels
        check_product(plain, 5632 / 4, 16, 40);
        // a batch of a few sequences: the matrix-vector kernels over several rows, K chunks
        for (int64_t M : {2, 3, 4, 5, 8, 9, 16, 17}) check_product(plain, 384, 32, M);
        for (int64_t M : {2, 4, 7}) check_product(plain, 6272, 16, M);
    }
    // q5_0_r16 (AVX2): every count of activation rows a call of 4 can leave, odd group counts
    for (int64_t M : {6, 7}) check_product(GGML_TYPE_Q5_0, 384, 48, M);
    check_product(GGML_TYPE_Q5_0, 896, 80, 3);
    for (ggml_type plain : {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}) {
        for (int64_t K : {256, 512, 2048}) check_product(plain, K, 48, 1);
        check_product(plain, 256, 64, 3);
        check_product(plain, 512, 80, 20);
        check_product(plain, 5632, 16, 40);
    }
}

TEST_CASE("q4_0_r16 matrix-vector kernels (AVX2): a row's product has the same bits whatever rows share the call") {
    // calls of 1 and 2 rows run both halves of a group per block, calls of 3 and 4 a half at a
    // time: a sequence's logits must not depend on the batch beside it
    for (int64_t K : {384, 2048}) {
        CAPTURE(K);
        Ctx c;
        const int64_t N = 48, M = 4;
        ggml_tensor * w = random_tensor(c.ctx, GGML_TYPE_Q4_0, K, N);
        ggml_tensor * w16 = interleaved_copy(c.ctx, w);
        ggml_tensor * x = random_tensor(c.ctx, GGML_TYPE_F32, K, M);
        for (ggml_cpu_features path : available_paths()) {
            if (path != GGML_CPU_FEATURES_AVX2) continue;
            ggml_cpu_set_features_limit(path);
            const std::vector<float> all = run(ggml_mul_mat(c.ctx, w16, x), 1);
            std::vector<double> mag;
            const std::vector<double> ref = reference(w, x, &mag);
            for (size_t i = 0; i < ref.size(); ++i) REQUIRE(std::fabs(all[i] - ref[i]) <= 2e-5 * mag[i] + 1e-6);
            for (int64_t n : {1, 2, 3}) { // rows [m0, m0 + n) alone
                for (int64_t m0 = 0; m0 + n <= M; ++m0) {
                    CAPTURE(n);
                    CAPTURE(m0);
                    ggml_tensor * xs = ggml_view_2d(c.ctx, x, K, n, x->nb[1], m0 * x->nb[1]);
                    const std::vector<float> part = run(ggml_mul_mat(c.ctx, w16, xs), 1);
                    CHECK(std::memcmp(part.data(), all.data() + m0 * N, part.size() * sizeof(float)) == 0);
                }
            }
        }
        ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
    }
}

namespace {
std::vector<char> file_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}
} // namespace

TEST_CASE("a model repacked at load saves the same GGUF file as one kept as it was; its logits stay close") {
  for (ggml_type plain : PLAIN_TYPES) {
    const std::string type = ggml_type_name(plain);
    CAPTURE(type);
    // the q4_K file is llama.cpp's Q4_K_M mix (q4_K and q6_K matrices)
    const std::string src = shared_dir() + "/gguf-quant/tiny256-" + (plain == GGML_TYPE_Q4_K ? "q4_k_m" : plain == GGML_TYPE_Q6_K ? "q6_k" : type) + ".gguf";
    const std::string out[2] = {"/tmp/kvg-test-repack-plain.gguf", "/tmp/kvg-test-repack-r16.gguf"};
    std::vector<float> logits[2];
    for (int repack = 0; repack < 2; ++repack) {
        kvg_model_params mp = kvg_model_default_params();
        mp.repack = repack;
        char err[512] = "";
        kvg_model * m = kvg_model_load(src.c_str(), nullptr, mp, err, sizeof err);
        REQUIRE_MESSAGE(m, err);
        const bool interleaved = std::string(kvg_model_desc(m)).find(type + "_r16") != std::string::npos;
        CHECK(interleaved == (repack && ggml_kvg_repacks(plain)));
        const kvg_ftype ft = plain == GGML_TYPE_Q4_0 ? KVG_FTYPE_Q4_0 : KVG_FTYPE_Q8_0; // q4_K: read through its unpacked copy
        REQUIRE_MESSAGE(kvg_model_save_gguf(m, out[repack].c_str(), ft, false, err, sizeof err), err);
        kvg_context * c = kvg_context_new(m, kvg_context_default_params(), err, sizeof err);
        REQUIRE_MESSAGE(c, err);
        const kvg_token toks[3] = {1, 50, 300};
        for (int i = 0; i < 3; ++i) {
            const float * l = kvg_decode(c, toks + i, 1, i, err, sizeof err); // one row: the interleaved kernel
            REQUIRE_MESSAGE(l, err);
            logits[repack].insert(logits[repack].end(), l, l + kvg_model_n_vocab(m));
        }
        kvg_context_free(c);
        kvg_model_free(m);
    }
    CHECK(file_bytes(out[0]) == file_bytes(out[1]));
    CHECK(file_bytes(out[0]).size() > 100000);
    double d = 0, n = 0;
    for (size_t i = 0; i < logits[0].size(); ++i) {
        d += (logits[0][i] - logits[1][i]) * (logits[0][i] - logits[1][i]);
        n += logits[0][i] * logits[0][i];
    }
    // the same products summed in another order (~1e-7 relative per product); a last-bit change
    // can flip the rounding of one activation to q8_0 in a later layer, which moves the logits by
    // up to ~1e-3 (iq4_nl: 7.8e-4); a wrong kernel moves them by O(1)
    CHECK(std::sqrt(d / n) < 2e-3);
    for (const std::string & p : out) std::remove(p.c_str());
  }
}

TEST_CASE("GGUF: a tensor of an interleaved type is refused by name on reading") {
    for (ggml_type plain : PLAIN_TYPES) {
        const ggml_type r16 = interleaved(plain);
        Ctx c;
        ggml_tensor * w = random_tensor(c.ctx, GGML_TYPE_Q4_0, 128, 16);
        ggml_set_name(w, "w");
        gguf_context * g = gguf_init_empty();
        gguf_add_tensor(g, w);
        const std::string path = "/tmp/kvg-test-repack-type.gguf";
        REQUIRE(gguf_write_to_file(g, path.c_str(), false));
        gguf_free(g);
        std::vector<char> bytes = file_bytes(path);
        // the tensor info: name "w" (u64 length 1, 'w'), n_dims, ne[2], then the type (u32 2 = q4_0)
        const char key[] = {1, 0, 0, 0, 0, 0, 0, 0, 'w'};
        auto at = std::search(bytes.begin(), bytes.end(), key, key + sizeof key);
        REQUIRE(at != bytes.end());
        const size_t type_at = (size_t) (at - bytes.begin()) + sizeof key + 4 + 2 * 8;
        REQUIRE(bytes[type_at] == GGML_TYPE_Q4_0);
        bytes[type_at] = (char) r16;
        std::ofstream(path, std::ios::binary).write(bytes.data(), (std::streamsize) bytes.size());
        char err[512] = "";
        ggml_context * meta = nullptr;
        gguf_init_params gp = {true, &meta};
        CHECK(gguf_init_from_file_ex(path.c_str(), gp, err, sizeof err) == nullptr);
        CHECK(std::string(err).find(ggml_type_name(r16)) != std::string::npos);
        std::remove(path.c_str());
    }
}

TEST_CASE("mul_mat: interleaved weights broadcast over dims 2 and 3 give the plain products") {
    Ctx c;
    const int64_t K = 256, N = 32;
    for (ggml_type plain : PLAIN_TYPES)
    for (int64_t M : {1, 3, 12}) {
        CAPTURE(M);
        ggml_tensor * w = ggml_new_tensor_4d(c.ctx, plain, K, N, 2, 1);
        ggml_tensor * x = ggml_new_tensor_4d(c.ctx, GGML_TYPE_F32, K, M, 4, 2);
        std::vector<float> row(K);
        for (int64_t r = 0; r < N * 2; ++r) {
            for (auto & v : row) v = frand();
            ggml_get_type_traits(plain)->from_float_ref(row.data(), (char *) w->data + r * w->nb[1], K);
        }
        for (int64_t i = 0; i < ggml_nelements(x); ++i) ((float *) x->data)[i] = frand();
        ggml_tensor * w16 = ggml_dup_tensor(c.ctx, w);
        std::memcpy(w16->data, w->data, ggml_nbytes(w));
        for (ggml_cpu_features path : available_paths()) {
            ggml_cpu_set_features_limit(path);
            CAPTURE(path);
            std::memcpy(w16->data, w->data, ggml_nbytes(w));
            w16->type = plain;
            if (!ggml_kvg_repack(w16)) { // paths without the kernel: written here
                for (int g = 0; g < 4; ++g) { // 2 matrices of 2 groups
                    kvg::r16_pack(plain, (char *) w->data + g * 16 * w->nb[1], w->nb[1], (char *) w16->data + g * 16 * w->nb[1], K);
                }
                w16->type = interleaved(plain);
            }
            const std::vector<float> want = run(ggml_mul_mat(c.ctx, w, x), 2), got = run(ggml_mul_mat(c.ctx, w16, x), 2);
            REQUIRE(got.size() == (size_t) (N * M * 8));
            int bad = 0, nonzero = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                bad += !(std::fabs(got[i] - want[i]) < 1e-3); // |products| ~ 10: float sums in another order at most
                nonzero += std::fabs(want[i]) > 0.1f;
            }
            CHECK(bad == 0);
            CHECK(nonzero > (int) got.size() / 2);
        }
    }
    ggml_cpu_set_features_limit(GGML_CPU_FEATURES_BEST);
}
