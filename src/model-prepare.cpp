// Load-time changes to the weights of a model held in writable memory: matrices rearranged
// for the kernels (repack) and f16 matrices rounded to bf16 where the CPU multiplies bf16.
#include "model-impl.h"
#include "model.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace kvg {

namespace {

// The matrices a product reads: the layers' and the output (not a tied embedding, which
// ggml_get_rows reads).
std::vector<ggml_tensor *> product_matrices(const Model & m) {
    std::vector<ggml_tensor *> mats;
    for (const LayerWeights & l : m.layers) {
        for (ggml_tensor * t : l.matrices()) mats.push_back(t);
    }
    if (m.output != m.tok_embd) mats.push_back(m.output);
    return mats;
}

// Runs change(t) on every matrix, one matrix at a time per thread (1.1B q4_0 repack on 2
// cores: 70 -> 35 ms); returns how many it changed.
int change_matrices(const std::vector<ggml_tensor *> & mats, bool (*change)(ggml_tensor *)) {
    std::atomic<int> next{0}, n{0};
    auto work = [&] {
        for (int i; (i = next++) < (int) mats.size();) n += change(mats[i]) ? 1 : 0;
    };
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < std::min(8u, std::thread::hardware_concurrency()); ++i) {
        try {
            pool.emplace_back(work);
        } catch (const std::system_error &) {
            break; // fewer threads: the ones running take the rest
        }
    }
    work();
    for (auto & th : pool) th.join();
    return n;
}

// f16 -> bf16 in place, row by row through an f32 row (nearest even, as ggml_fp32_to_bf16;
// the vector converters: a 1.1B model in ~0.2 s of a 0.4 s load, ggml.h's scalar rows 2.2 s).
bool round_to_bf16(ggml_tensor * t) {
    if (t->type != GGML_TYPE_F16 || !ggml_is_contiguous(t)) return false;
    const int64_t k = t->ne[0];
    std::vector<float> row(k);
    for (int64_t r = 0; r < ggml_nrows(t); ++r) {
        void * p = (char *) t->data + r * t->nb[1];
        ggml_cpu_fp16_to_fp32((const ggml_fp16_t *) p, row.data(), k);
        ggml_cpu_fp32_to_bf16(row.data(), (ggml_bf16_t *) p, k);
    }
    t->type = GGML_TYPE_BF16; // the same element size: strides stay
    return true;
}

} // namespace

bool rounds_f16_to_bf16() { return ggml_cpu_get_features() >= GGML_CPU_FEATURES_AVX512_BF16; }

int repack_weights(Model & m) {
    const std::vector<ggml_tensor *> mats = product_matrices(m);
    bool any = false;
    for (const ggml_tensor * t : mats) any |= ggml_kvg_repacks(t->type);
    if (!any) return 0;
    // a read-only mapping is never written: load_gguf reads files with matrices to rearrange
    // into memory (in a private writable mapping each page would be copied on a fault of its own)
    if (m.mapping && m.mapping->mapped) return 0;
    return change_matrices(mats, ggml_kvg_repack);
}

int round_f16_weights(Model & m) {
    if (!rounds_f16_to_bf16() || (m.mapping && m.mapping->mapped)) return 0;
    return change_matrices(product_matrices(m), round_to_bf16);
}

} // namespace kvg
