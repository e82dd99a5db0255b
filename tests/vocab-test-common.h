// What the tokenizer tests share: a vocabulary file with keys changed, and a vocab_only load.
#pragma once

#include <doctest/doctest.h>

#include "gguf.h"
#include "kvgraph.h"
#include "test-common.h"

#include <string>

// A copy of the GGUF at path with its keys changed by edit(gguf_context *) (gguf's own writer),
// in a per-process temporary file named after tag.
template <class Edit> std::string edited_gguf(const std::string & path, const std::string & tag, Edit edit) {
    gguf_init_params gp = {true, nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), gp);
    REQUIRE(g != nullptr);
    edit(g);
    const std::string out = temp_path("vocab", tag + ".gguf");
    REQUIRE(gguf_write_to_file(g, out.c_str(), false));
    gguf_free(g);
    return out;
}

// The tokenizer of a GGUF (vocab_only); fails the test if it does not load.
inline kvg_model * load_vocab(const std::string & path) {
    kvg_model_params p = kvg_model_default_params();
    p.vocab_only = true;
    char err[512] = "";
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, p, err, sizeof err);
    INFO(err);
    REQUIRE(m != nullptr);
    return m;
}
