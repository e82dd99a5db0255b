// C++ owners for ggml's handles (ggml's ggml-cpp.h names): std::unique_ptr with the
// matching free function, so a handle is released on every path out of a scope.
#pragma once

#ifndef __cplusplus
#error "ggml-cpp.h is C++"
#endif

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "gguf.h"

#include <memory>

struct ggml_context_deleter { void operator()(ggml_context * p) { ggml_free(p); } };
struct gguf_context_deleter { void operator()(gguf_context * p) { gguf_free(p); } };
struct ggml_gallocr_deleter { void operator()(ggml_gallocr_t p) { ggml_gallocr_free(p); } };
struct ggml_backend_deleter { void operator()(ggml_backend_t p) { ggml_backend_free(p); } };
struct ggml_backend_buffer_deleter { void operator()(ggml_backend_buffer_t p) { ggml_backend_buffer_free(p); } };
struct ggml_backend_sched_deleter { void operator()(ggml_backend_sched_t p) { ggml_backend_sched_free(p); } };

typedef std::unique_ptr<ggml_context, ggml_context_deleter> ggml_context_ptr;
typedef std::unique_ptr<gguf_context, gguf_context_deleter> gguf_context_ptr;
typedef std::unique_ptr<ggml_gallocr, ggml_gallocr_deleter> ggml_gallocr_ptr;
typedef std::unique_ptr<ggml_backend, ggml_backend_deleter> ggml_backend_ptr;
typedef std::unique_ptr<ggml_backend_buffer, ggml_backend_buffer_deleter> ggml_backend_buffer_ptr;
typedef std::unique_ptr<ggml_backend_sched, ggml_backend_sched_deleter> ggml_backend_sched_ptr;
