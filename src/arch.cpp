// The table of arch.h. Each row is read from llama.cpp's loader and graph for that
// architecture (src/models/*.cpp there): which tensors it creates and its rope type.
#include "arch.h"

#include "ggml.h"

namespace kvg {

static const int NEOX = GGML_ROPE_TYPE_NEOX;

//                              rope  bias   qk_norm fused_qkv gate_up rope_freqs head_size no_rope_step longrope gemma
static const ArchDesc kArchs[] = {
    {"llama", 0, false, false, false, false, true, false, 0},
    {"qwen2", NEOX, true, false, false, false, false, false, 0},
    {"qwen3", NEOX, false, true, false, false, false, true, 0},
    {"phi3", NEOX, false, false, true, true, false, false, 0, true},
    {"smollm3", 0, false, false, false, false, false, false, 4},
    {"gemma2", NEOX, false, false, false, false, false, true, 0, false, 2},
    {"gemma3", NEOX, false, true, false, false, false, true, 0, false, 3},
};

const ArchDesc * find_arch(const std::string & name) {
    for (const ArchDesc & a : kArchs) {
        if (name == a.name) return &a;
    }
    return nullptr;
}

std::string arch_names() {
    std::string out;
    for (const ArchDesc & a : kArchs) out += (out.empty() ? "'" : ", '") + std::string(a.name) + "'";
    return out;
}

} // namespace kvg
