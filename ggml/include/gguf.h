// GGUF reading and writing with ggml's gguf API (names, signatures and semantics), plus a
// checked loader extension (gguf_init_from_file_ex / gguf_init_from_buffer_ex) that reports
// what is wrong with a file and where. Header compiles as C99 and as C++.
//
// File layout (all little-endian):
//   magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
//   n_kv x { string key | u32 gguf_type | value }
//       value: scalar bytes, string = u64 length + bytes (no NUL),
//              array = u32 element gguf_type + u64 count + elements (arrays of arrays rejected)
//   n_tensors x { string name | u32 n_dims | n_dims x i64 ne | u32 ggml_type | u64 offset }
//   padding to general.alignment (u32 key, power of 2, default 32)
//   tensor data; each tensor's offset is relative to this point and aligned
//
// Reading never aborts on bad input: every count, length, type id, shape and offset is
// checked against the bytes actually present before anything is allocated.
// The accessors and setters abort (GGML_ASSERT) on programming errors such as an out-of-range
// id or asking for a value with the wrong type, as ggml's do.
#pragma once

#include "ggml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GGUF_MAGIC   "GGUF"
#define GGUF_VERSION 3

#define GGUF_KEY_GENERAL_ALIGNMENT "general.alignment"

#define GGUF_DEFAULT_ALIGNMENT 32

#ifdef __cplusplus
extern "C" {
#endif

// Types a KV value can have. Values are part of the file format.
enum gguf_type {
    GGUF_TYPE_UINT8   = 0,
    GGUF_TYPE_INT8    = 1,
    GGUF_TYPE_UINT16  = 2,
    GGUF_TYPE_INT16   = 3,
    GGUF_TYPE_UINT32  = 4,
    GGUF_TYPE_INT32   = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL    = 7,
    GGUF_TYPE_STRING  = 8,
    GGUF_TYPE_ARRAY   = 9,
    GGUF_TYPE_UINT64  = 10,
    GGUF_TYPE_INT64   = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT,
};

struct gguf_context;

struct gguf_init_params {
    // With ctx != NULL: if false, tensor data is read into *ctx; if true, *ctx only holds the
    // tensors' metadata (data == NULL), e.g. to point them into an mmap of the file at
    // gguf_get_data_offset() + gguf_get_tensor_offset().
    bool no_alloc;

    // If not NULL, *ctx receives a new ggml context with one tensor per GGUF tensor
    // (same names, types and shapes, in file order). Set to NULL on failure.
    struct ggml_context ** ctx;
};

GGML_API struct gguf_context * gguf_init_empty(void);
// NULL on failure, after printing the reason to stderr.
GGML_API struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params);

// kvgraph extension. NULL on failure, with a message naming the problem and its byte offset
// written to err (truncated to err_size, NUL-terminated); if err is NULL or err_size is 0 the
// message goes to stderr instead. On success err is set to "".
GGML_API struct gguf_context * gguf_init_from_file_ex(const char * fname, struct gguf_init_params params,
                                                      char * err, size_t err_size);
// ggml's: parses size bytes at data (not kept after the call returns); NULL on failure, the
// message through the log callback.
GGML_API struct gguf_context * gguf_init_from_buffer(const void * data, size_t size, struct gguf_init_params params);
// kvgraph extension: the same, the message in err as gguf_init_from_file_ex.
GGML_API struct gguf_context * gguf_init_from_buffer_ex(const void * data, size_t size, struct gguf_init_params params,
                                                        char * err, size_t err_size);

GGML_API void gguf_free(struct gguf_context * ctx);

// "u8", "i8", ..., "str", "arr", ...; NULL for an invalid type.
GGML_API const char * gguf_type_name(enum gguf_type type);

GGML_API uint32_t gguf_get_version    (const struct gguf_context * ctx);
GGML_API size_t   gguf_get_alignment  (const struct gguf_context * ctx);
// File offset of the tensor data section (== gguf_get_meta_size for files this library writes).
GGML_API size_t   gguf_get_data_offset(const struct gguf_context * ctx);

GGML_API int64_t      gguf_get_n_kv(const struct gguf_context * ctx);
GGML_API int64_t      gguf_find_key(const struct gguf_context * ctx, const char * key); // -1 if not found
GGML_API const char * gguf_get_key (const struct gguf_context * ctx, int64_t key_id);

// kv type is GGUF_TYPE_ARRAY for arrays; arr type is the element type (arrays only).
GGML_API enum gguf_type gguf_get_kv_type (const struct gguf_context * ctx, int64_t key_id);
GGML_API enum gguf_type gguf_get_arr_type(const struct gguf_context * ctx, int64_t key_id);

// Abort if the key's type differs.
GGML_API uint8_t      gguf_get_val_u8  (const struct gguf_context * ctx, int64_t key_id);
GGML_API int8_t       gguf_get_val_i8  (const struct gguf_context * ctx, int64_t key_id);
GGML_API uint16_t     gguf_get_val_u16 (const struct gguf_context * ctx, int64_t key_id);
GGML_API int16_t      gguf_get_val_i16 (const struct gguf_context * ctx, int64_t key_id);
GGML_API uint32_t     gguf_get_val_u32 (const struct gguf_context * ctx, int64_t key_id);
GGML_API int32_t      gguf_get_val_i32 (const struct gguf_context * ctx, int64_t key_id);
GGML_API float        gguf_get_val_f32 (const struct gguf_context * ctx, int64_t key_id);
GGML_API uint64_t     gguf_get_val_u64 (const struct gguf_context * ctx, int64_t key_id);
GGML_API int64_t      gguf_get_val_i64 (const struct gguf_context * ctx, int64_t key_id);
GGML_API double       gguf_get_val_f64 (const struct gguf_context * ctx, int64_t key_id);
GGML_API bool         gguf_get_val_bool(const struct gguf_context * ctx, int64_t key_id);
GGML_API const char * gguf_get_val_str (const struct gguf_context * ctx, int64_t key_id);
// The bytes of a single fixed-size value, as stored (little-endian); a string, or anything
// holding other than exactly one element, aborts.
GGML_API const void * gguf_get_val_data(const struct gguf_context * ctx, int64_t key_id);
// How many elements an array has; a scalar counts as 1.
GGML_API size_t       gguf_get_arr_n   (const struct gguf_context * ctx, int64_t key_id);
// An array's elements as stored, back to back (a bool takes one byte, 0 or 1). String
// arrays have no such block: use gguf_get_arr_str.
GGML_API const void * gguf_get_arr_data(const struct gguf_context * ctx, int64_t key_id);
// Element i of a string array, NUL-terminated.
GGML_API const char * gguf_get_arr_str (const struct gguf_context * ctx, int64_t key_id, size_t i);

GGML_API int64_t        gguf_get_n_tensors    (const struct gguf_context * ctx);
GGML_API int64_t        gguf_find_tensor      (const struct gguf_context * ctx, const char * name); // -1 if not found
// Offset relative to gguf_get_data_offset.
GGML_API size_t         gguf_get_tensor_offset(const struct gguf_context * ctx, int64_t tensor_id);
GGML_API const char *   gguf_get_tensor_name  (const struct gguf_context * ctx, int64_t tensor_id);
GGML_API enum ggml_type gguf_get_tensor_type  (const struct gguf_context * ctx, int64_t tensor_id);
GGML_API size_t         gguf_get_tensor_size  (const struct gguf_context * ctx, int64_t tensor_id); // bytes

// Deletes the pair named key. Returns its id before the deletion (later ids shift down by
// one), or -1 when there was no such key.
GGML_API int64_t gguf_remove_key(struct gguf_context * ctx, const char * key);

// Each setter replaces the value of key, or adds the pair; either way the pair is last afterwards.
// Setting general.alignment (u32 only, a power of 2) re-lays out the tensor offsets.
GGML_API void gguf_set_val_u8  (struct gguf_context * ctx, const char * key, uint8_t      val);
GGML_API void gguf_set_val_i8  (struct gguf_context * ctx, const char * key, int8_t       val);
GGML_API void gguf_set_val_u16 (struct gguf_context * ctx, const char * key, uint16_t     val);
GGML_API void gguf_set_val_i16 (struct gguf_context * ctx, const char * key, int16_t      val);
GGML_API void gguf_set_val_u32 (struct gguf_context * ctx, const char * key, uint32_t     val);
GGML_API void gguf_set_val_i32 (struct gguf_context * ctx, const char * key, int32_t      val);
GGML_API void gguf_set_val_f32 (struct gguf_context * ctx, const char * key, float        val);
GGML_API void gguf_set_val_u64 (struct gguf_context * ctx, const char * key, uint64_t     val);
GGML_API void gguf_set_val_i64 (struct gguf_context * ctx, const char * key, int64_t      val);
GGML_API void gguf_set_val_f64 (struct gguf_context * ctx, const char * key, double       val);
GGML_API void gguf_set_val_bool(struct gguf_context * ctx, const char * key, bool         val);
GGML_API void gguf_set_val_str (struct gguf_context * ctx, const char * key, const char * val);

// New array of n elements of a fixed-size type, copying n * element size bytes from data
// (a string or array type aborts; bools are stored as 0 or 1).
GGML_API void gguf_set_arr_data(
        struct gguf_context * ctx,
        const char          * key,
        enum gguf_type        type,   // the element type
        const void          * data,   // n elements; may be NULL when n == 0
        size_t                n);
// New array of n strings copied from data (no NULL entries).
GGML_API void gguf_set_arr_str(
        struct gguf_context * ctx,
        const char          * key,
        const char         ** data,
        size_t                n);

// Set or add every KV pair of src.
GGML_API void gguf_set_kv(struct gguf_context * ctx, const struct gguf_context * src);

// Add a contiguous tensor (unique name); its data pointer is kept (not copied) for writing.
GGML_API void gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor);
// Change a tensor's type; offsets of the following tensors are recomputed (data stays one
// contiguous block apart from alignment padding).
GGML_API void gguf_set_tensor_type(struct gguf_context * ctx, const char * name, enum ggml_type type);
// Point a tensor at gguf_get_tensor_size bytes of data (not copied) for writing.
GGML_API void gguf_set_tensor_data(struct gguf_context * ctx, const char * name, const void * data);

// Write header, KV pairs, tensor infos and padding, then (unless only_meta) every tensor's
// data, each padded to the alignment. False (with a message on stderr) on I/O failure or if
// a tensor has no data.
GGML_API bool   gguf_write_to_file(const struct gguf_context * ctx, const char * fname, bool only_meta);
// Bytes of the metadata including the padding before the data section.
GGML_API size_t gguf_get_meta_size(const struct gguf_context * ctx);
// Writes gguf_get_meta_size bytes to data.
GGML_API void   gguf_get_meta_data(const struct gguf_context * ctx, void * data);

#ifdef __cplusplus
}
#endif
