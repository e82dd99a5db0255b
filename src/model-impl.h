// Shared by the model loaders and the GGUF writer (model*.cpp): messages, the file's bytes,
// hyperparameter checks, the one-line description. Not part of the interface (model.h).
#pragma once

#include "errors.h"
#include "kvgraph.h"
#include "model.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvg {

// Read-only view of a whole file: mmap'd, or read into anonymous memory when mapping is off
// (not zero-filled first, and in 2 MiB pages where transparent huge pages are on; on the Zen 4
// machine measured, generation ran as fast from the mapped file's 4 KiB pages).
struct FileMapping {
    const uint8_t * data = nullptr;
    size_t size = 0;
    bool mapped = false;   // data is the file's mapping
    void * copy = nullptr; // or the anonymous mapping it was read into
    size_t copy_size = 0;

    ~FileMapping();
    // Files of at most read_max bytes are read (not mapped), to lead bytes past the start of a
    // page-aligned buffer whose pages are committed in one call (no fault per page).
    bool open(const std::string & path, bool use_mmap, std::string * err, size_t read_max = 0, size_t lead = 0);
};

// A no-alloc context for n_tensors tensor structs.
ggml_context * new_meta_ctx(size_t n_tensors);
// The model's one-line summary; types names its weight types ("f32", "q8_0/f32").
std::string describe(const Model & m, const char * types);
bool check_hparams(const HParams & h, std::string * err);
// A llama2.c tokenizer file as the model's vocabulary (it must have n_vocab tokens).
bool load_tokenizer(Model & m, const std::string & tokenizer_path, std::string * err);

} // namespace kvg
