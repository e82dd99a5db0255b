// kvgraph runtime: Llama-style models (GGUF or llama2.c checkpoints), tokenizer, KV cache,
// decode loop and sampling behind a small C API with the kvg_ prefix.
//
// Errors are returned, never aborts: functions that can fail on bad input take
// (char * err, size_t err_size) and write a NUL-terminated message there (err may be NULL);
// kvg_last_status() then tells the kind of failure (enum kvg_status).
// No C++ exception leaves a kvg_ function: running out of memory inside one returns its
// documented error ("...: out of memory" in err). Every pointer argument may be NULL: a NULL
// model, context or sampler makes a function return its error value (stated per
// function below); *_free(NULL) does nothing.
//
// A complete program (tests compile it as C from this comment, run it and compare its text
// with an independent reference; copy it out and drop the "// " prefixes):
// BEGIN_EXAMPLE
// #include "kvgraph.h"
// #include <stdio.h>
// #include <stdlib.h>
//
// // usage: example MODEL [TOKENIZER or -] [PROMPT] [N_PREDICT] [TEMP]
// int main(int argc, char ** argv) {
//     char err[512];
//     if (argc < 2) {
//         fprintf(stderr, "usage: %s MODEL [TOKENIZER or -] [PROMPT] [N_PREDICT] [TEMP]\n", argv[0]);
//         return 1;
//     }
//     const char * tokenizer = argc > 2 && argv[2][0] != '-' ? argv[2] : NULL; // GGUF files carry their own
//     const char * prompt = argc > 3 ? argv[3] : "Once upon a time";
//     const int n_predict = argc > 4 ? atoi(argv[4]) : 64;
//     struct kvg_sampler_params sp = kvg_sampler_default_params();
//     if (argc > 5) sp.temp = (float) atof(argv[5]); // 0: greedy
//
//     struct kvg_model * model = kvg_model_load(argv[1], tokenizer, kvg_model_default_params(), err, sizeof err);
//     if (!model) { fprintf(stderr, "%s\n", err); return 1; }
//     // n_ctx 0 (the default): the model's context length
//     struct kvg_context * ctx = kvg_context_new(model, kvg_context_default_params(), err, sizeof err);
//     if (!ctx) { fprintf(stderr, "%s\n", err); kvg_model_free(model); return 1; }
//     struct kvg_sampler * sampler = kvg_sampler_new(sp);
//
//     kvg_token tokens[1024];
//     const int32_t n_prompt = kvg_tokenize(model, prompt, true, tokens, 1024); // BOS first
//     const float * logits = NULL;
//     if (n_prompt > 0 && sampler) logits = kvg_decode(ctx, tokens, n_prompt, 0, err, sizeof err); // at 0..n_prompt-1
//     else snprintf(err, sizeof err, "the prompt does not fit in 1024 tokens, or the model has no tokenizer");
//     int status = logits ? 0 : 1;
//     kvg_token prev = n_prompt > 0 ? tokens[n_prompt - 1] : -1;
//     for (int32_t pos = n_prompt; logits && pos < n_prompt + n_predict; ++pos) {
//         const kvg_token next = kvg_sampler_sample(sampler, logits, kvg_model_n_vocab(model));
//         if (next == kvg_model_eos(model)) break;
//         char piece[256];
//         if (kvg_token_to_piece(model, prev, next, piece, sizeof piece) > 0) fputs(piece, stdout); // text after prev
//         fflush(stdout);
//         prev = next;
//         logits = kvg_decode(ctx, &next, 1, pos, err, sizeof err); // the new token at position pos
//         if (!logits && kvg_last_status() != KVG_STATUS_CONTEXT_FULL) status = 1; // a full context just ends the text
//     }
//     printf("\n");
//     if (status) fprintf(stderr, "%s\n", err);
//     kvg_sampler_free(sampler);
//     kvg_context_free(ctx);
//     kvg_model_free(model);
//     return status;
// }
// END_EXAMPLE
//
// Several independent sequences share one context with n_seq_max > 1: kvg_decode_batch runs
// tokens of any of them in one graph (each sequence has its own cache rows and positions).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// A shared build compiles with hidden visibility: everything declared in this header (up to the
// matching pop at its end) is what libkvgraph exports.
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef int32_t kvg_token;

// ---- errors ---------------------------------------------------------------------------------
// The kind of the last failure, beside its message, so a caller can tell a full context from
// a bad token without parsing text.
enum kvg_status {
    KVG_STATUS_OK            = 0,
    KVG_STATUS_BAD_INPUT     = 1, // an argument out of range: NULL where one is needed, a bad
                                  // parameter, token id, sequence id or position
    KVG_STATUS_CONTEXT_FULL  = 2, // the tokens do not fit: positions past n_ctx, or earlier
                                  // positions a ring cache no longer holds
    KVG_STATUS_UNSUPPORTED   = 3, // a well-formed file kvgraph cannot run: its architecture,
                                  // a tensor type, a tokenizer or pre-tokenizer
    KVG_STATUS_OUT_OF_MEMORY = 4, // an allocation or reservation failed, or a request is over
                                  // max_weight_bytes / max_kv_bytes / the machine's memory
    KVG_STATUS_IO            = 5, // a file could not be opened, read, written or replaced
    KVG_STATUS_BAD_FILE      = 6, // a model or tokenizer file that is truncated, corrupt or
                                  // inconsistent (with itself or with the other file)
};
// Status of the last call on this thread that takes (err, err_size): KVG_STATUS_OK when it
// succeeded. Like errno, it is per thread and only the last such call counts.
enum kvg_status kvg_last_status(void);
// A short constant name for a status ("ok", "bad input", ...); "unknown" for other values.
const char * kvg_status_name(enum kvg_status status);

struct kvg_model;
struct kvg_context;
struct kvg_sampler;

// ---- models -------------------------------------------------------------------------------
struct kvg_model_params {
    bool   use_mmap;         // map the file and point weights into it (default true); false copies them
    size_t max_weight_bytes; // refuse models whose weights need more bytes (0: no limit)
    // Scan every weight after loading: NaN/inf in f32/f16/bf16 tensors, non-finite block
    // scales in the block types; the first one found fails the load (default false: reads all weights).
    bool   check_tensors;
    // Load only the tokenizer (as llama.cpp's vocab_only): a GGUF file with or without
    // tensors, e.g. llama.cpp's vocab-only files. kvg_tokenize / kvg_detokenize work on the
    // model; creating a context from it fails (default false).
    bool   vocab_only;
    // Rearrange q4_0, q8_0, q4_K, q6_K and iq4_nl matrices at load into the CPU's row-interleaved layouts
    // where it has the kernel (AVX-512 VNNI; ggml_kvg_repack): faster generation, the same
    // products summed in another order; a GGUF file holding such matrices is then read into
    // memory instead of mapped (default true).
    bool   repack;
    // Round f16 matrices (the layers' and the output, not the embeddings) to bf16 at load, in
    // place, where the CPU path has AVX-512 BF16: prompts run at the vdpbf16ps rate, about twice
    // the f32 FMA rate an exact f16 product is bound to, with 3 fewer mantissa bits per weight
    // (nearest even), as ik_llama.cpp's run-time repacking does. A GGUF file with f16 matrices is
    // then read into memory instead of mapped. Other paths keep f16 (default false: exact f16).
    bool   f16_as_bf16;
};
struct kvg_model_params kvg_model_default_params(void);

// path: a GGUF file (architecture llama, qwen2, qwen3, phi3, smollm3, gemma2 or gemma3, with
// llama.cpp's keys and tensor names; another architecture, a mixture-of-experts file
// ({arch}.expert_count > 0 or expert tensors), or a tensor or rope scaling type that would
// change the arithmetic and is not implemented, fails with KVG_STATUS_UNSUPPORTED naming it; a
// llama file's attention.sliding_window is ignored, as llama.cpp's llama graph attends every
// position) or a
// llama2.c checkpoint (.bin). tokenizer_path:
// a llama2.c tokenizer.bin for checkpoints (NULL: no tokenizer, token ids only); for GGUF
// files it overrides the tokenizer.ggml.* metadata when not NULL. NULL on failure.
struct kvg_model * kvg_model_load(const char * path, const char * tokenizer_path, struct kvg_model_params params,
                                  char * err, size_t err_size);
void kvg_model_free(struct kvg_model * model);

// Output weight types of kvg_model_save_gguf.
enum kvg_ftype {
    KVG_FTYPE_F32  = 0,
    KVG_FTYPE_F16  = 1,
    KVG_FTYPE_Q8_0 = 2,
    KVG_FTYPE_Q4_0 = 3,
    KVG_FTYPE_BF16 = 4,
    KVG_FTYPE_IQ4_XS = 5, // llama.cpp's IQ4_XS: 4.25 bits per weight (super-blocks of 256 values)
    KVG_FTYPE_TQ1_0 = 6,  // llama.cpp's TQ1_0: ternary, 1.69 bits per weight (BitNet-style models)
    KVG_FTYPE_TQ2_0 = 7,  // llama.cpp's TQ2_0: ternary, 2.06 bits per weight
};
// Writes the model (weights converted to ftype; 1-D norms stay f32; for iq4_xs, as
// llama-quantize's IQ4_XS, the output matrix (or tied embeddings) in q6_K and matrices whose
// rows are not a multiple of 256 in iq4_nl; for tq1_0 / tq2_0, as llama-quantize mixes them,
// the token embeddings in q4_K, the output matrix (or tied embeddings) in q6_K and rows not a
// multiple of 256 in q4_0; block-type matrices whose rows are not a multiple of 32 in f16; the
// ternary encoders fit a scale per 256 values, so a model that is not ternary loses most of
// its accuracy) as a GGUF v3 llama file with
// llama.cpp's keys and tensor names, tokenizer included when the model has one (a model of
// another architecture: false, KVG_STATUS_UNSUPPORTED). A model
// without a tokenizer gets a placeholder vocabulary unless no_vocab is set. The file is
// written beside path and renamed over it, so saving over the file the model was loaded
// from is safe (the loaded model keeps its mapping) and a failed save leaves the old file.
// false on failure (NULL model or path included).
bool kvg_model_save_gguf(const struct kvg_model * model, const char * path, enum kvg_ftype ftype, bool no_vocab,
                         char * err, size_t err_size);

// Accessors: a NULL model gives 0 (bos/eos: -1, has_vocab: false, desc: "").
int32_t kvg_model_n_vocab(const struct kvg_model * model);
int32_t kvg_model_n_ctx_train(const struct kvg_model * model);
int32_t kvg_model_n_embd(const struct kvg_model * model);
int32_t kvg_model_n_layer(const struct kvg_model * model);
int32_t kvg_model_n_head(const struct kvg_model * model);
int32_t kvg_model_n_head_kv(const struct kvg_model * model);
kvg_token kvg_model_bos(const struct kvg_model * model); // -1 if none
kvg_token kvg_model_eos(const struct kvg_model * model); // -1 if none
// Whether token ends generation (llama.cpp's llama_vocab_is_eog): EOS, the file's
// tokenizer.ggml.eot_token_id / eom_token_id, and the end-of-turn control tokens of chat
// vocabularies ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|end|>",
// "<end_of_turn>", "<|endoftext|>"). False for a NULL model or an id outside the vocabulary.
bool kvg_token_is_eog(const struct kvg_model * model, kvg_token token);
bool kvg_model_has_vocab(const struct kvg_model * model);
size_t kvg_model_weight_bytes(const struct kvg_model * model); // bytes of all weight tensors
// One line: format, shape, weight types (e.g. "llama2.c f32, 4 layers, dim 64, ...").
const char * kvg_model_desc(const struct kvg_model * model);

// ---- tokenizer --------------------------------------------------------------------------------
// Writes up to n_max token ids; returns the count, or -(count) if n_max is too small or
// tokens is NULL, or INT32_MIN if the model is NULL or has no tokenizer. NULL text is "".
int32_t kvg_tokenize(
        const struct kvg_model * model,
        const char             * text,     // UTF-8, NUL-terminated
        bool                     add_bos,  // prepend the model's BOS token (if it has one)
        kvg_token              * tokens,
        int32_t                  n_max);   // capacity of tokens
// kvg_tokenize, plus llama.cpp's parse_special: if true, the text of a control or unknown token
// in text ("<|eot_id|>", "<s>", ...) becomes that token's id (leftmost, longest match), and the
// text between such tokens is tokenized on its own (for SentencePiece, each part with its own
// dummy-prefix space, as llama.cpp). parse_special = false is kvg_tokenize. Same returns.
int32_t kvg_tokenize_special(
        const struct kvg_model * model,
        const char             * text,           // UTF-8, NUL-terminated
        bool                     add_bos,        // prepend the model's BOS token (if it has one)
        bool                     parse_special,  // control-token text becomes the token
        kvg_token              * tokens,
        int32_t                  n_max);         // capacity of tokens
// Text that token adds after prev (prev < 0: token starts the text), streaming-safe. Returns
// its length (buf NUL-terminated when it fits), or -(length) if buf is NULL or too small,
// or INT32_MIN if the model is NULL or has no tokenizer.
int32_t kvg_token_to_piece(
        const struct kvg_model * model,
        kvg_token                prev,   // the token before it, or < 0 at the start of the text
        kvg_token                token,
        char                   * buf,
        int32_t                  size);  // bytes of buf
// Whole-sequence text; same return convention as kvg_token_to_piece; INT32_MIN also for
// n < 0 or tokens NULL with n > 0.
int32_t kvg_detokenize(const struct kvg_model * model, const kvg_token * tokens, int32_t n, char * buf, int32_t size);

// ---- chat templates ---------------------------------------------------------------------------
// One message of a conversation: role ("system", "user", "assistant") and content, UTF-8,
// NUL-terminated, owned by the caller.
struct kvg_chat_message {
    const char * role;
    const char * content;
};
// Formats a conversation as the model's chat template does, as text to tokenize (llama.cpp's
// llama_chat_apply_template: the same templates, byte for byte). tmpl is a template's name
// (llama3, chatml, phi3, phi4, gemma, mistral-v1, mistral-v3, mistral-v3-tekken, mistral-v7,
// mistral-v7-tekken, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip) or a Jinja text,
// recognized by its markers as llama.cpp does (Qwen's and SmolLM's are chatml); NULL: the
// model file's tokenizer.chat_template, chatml when it has none (model may be NULL when tmpl
// is not). No Jinja is run, and no BOS token is written: tokenize with add_bos. add_assistant
// ends the text with the opening of an assistant turn (the [INST] families have none).
// Returns the length of the text (without the NUL) and writes its first min(length + 1, size)
// bytes to buf (NUL-terminated when length < size): a return >= size means buf was too small
// (or NULL) and says how much it needs, as in llama.cpp. -1 with a message on failure: a
// template that is none of the above (kvg_status unsupported; the message quotes its start),
// NULL messages with n_msg > 0, a message with a NULL role or content, or no template and no
// model (bad input).
int32_t kvg_chat_apply_template(const struct kvg_model * model, const char * tmpl,
                                const struct kvg_chat_message * messages, size_t n_msg, bool add_assistant,
                                char * buf, int32_t size, char * err, size_t err_size);

// ---- contexts --------------------------------------------------------------------------------------
enum kvg_kv_type {
    KVG_KV_F32  = 0,
    KVG_KV_F16  = 1,
    KVG_KV_Q8_0 = 2, // written by quantizing set_rows, dequantized by attention; rows of n_embd_kv % 32 == 0
};
enum kvg_kv_mode {
    KVG_KV_LINEAR = 0, // slot = position: positions 0..n_ctx-1, each token attends all earlier ones
    KVG_KV_RING   = 1, // slot = position mod the ring: positions unbounded, sliding-window attention
};
enum kvg_attn_impl {
    KVG_ATTN_FLASH  = 0, // ggml_flash_attn_ext
    KVG_ATTN_MATMUL = 1, // mul_mat + soft_max_ext + mul_mat
};
struct kvg_context_params {
    int32_t n_ctx; // KV-cache slots per sequence; 0: the model's context length (as llama.cpp);
                   // more than the model's context length is an error, never a warning (positions
                   // past the trained length are untested; scripts/gguf-context-length.py writes a
                   // copy of a file with a longer one)
    int32_t n_threads;
    int32_t n_batch;   // max tokens per graph chunk
    enum kvg_kv_type kv_type;
    enum kvg_attn_impl attn;
    bool logits_all;   // keep logits of every token of a decode call, not only each sequence's last
    int32_t n_seq_max; // independent sequences (ids 0..n_seq_max-1), each owning n_ctx slots
    enum kvg_kv_mode kv_mode;
    // ring: a token attends the last n_window positions (its own included) plus the first
    // n_sink positions (attention sinks), n_window + n_sink <= n_ctx. The slack
    // n_ctx - n_sink - n_window lets a chunk of tokens run in one graph (more slack, fewer graphs).
    int32_t n_window;  // 0: n_ctx - n_sink
    int32_t n_sink;
    // Commit the cache's memory at creation. Default (false): the cache reserves address
    // space for all slots and pages become resident as tokens are written.
    bool kv_static;
    // Refuse (before reserving anything) a KV cache of more bytes than this, as
    // kvg_kv_cache_bytes would report (0: no limit).
    size_t max_kv_bytes;
};
// n_ctx = 0 (the model's), n_threads = 4, n_batch = 512, kv f32, flash attention, last logits only,
// one sequence, linear cache, dynamic residency, no KV memory limit.
struct kvg_context_params kvg_context_default_params(void);

// NULL on failure. The model must outlive the context. A Phi-3 file with LongRoPE tables
// (rope_factors_long/short.weight) rotates with its long table when n_ctx exceeds its original
// context (rope.scaling.original_context_length), else with the short one, as llama.cpp chooses.
struct kvg_context * kvg_context_new(const struct kvg_model * model, struct kvg_context_params params,
                                     char * err, size_t err_size);
void kvg_context_free(struct kvg_context * ctx);

// NULL ctx: 0 (kvg_set_n_threads does nothing; it ignores n_threads outside 1..GGML_MAX_N_THREADS).
int32_t kvg_n_ctx(const struct kvg_context * ctx);
size_t  kvg_kv_cache_bytes(const struct kvg_context * ctx); // K + V of all slots (reserved; resident when static)
void    kvg_set_n_threads(struct kvg_context * ctx, int32_t n_threads);

// Runs tokens[0..n) of sequence 0 at positions pos..pos+n-1 (in chunks of n_batch).
// Positions >= pos held by the cache are overwritten; pos must not exceed the number of
// positions already decoded. Returns the logits of the last token ([n_vocab], valid until
// the next decode) or NULL with a message (bad token id, positions beyond n_ctx, ...).
const float * kvg_decode(struct kvg_context * ctx, const kvg_token * tokens, int32_t n, int32_t pos,
                         char * err, size_t err_size);
// Runs n tokens of independent sequences in one graph: token i is tokens[i] of sequence
// seq_ids[i] at position pos[i]. The tokens of each sequence appear in position order with
// consecutive positions; its first one must not exceed the positions it has decoded (later
// positions are overwritten). Tokens of different sequences may be interleaved. Logits
// are computed for the last token of each sequence in the batch (every token with
// logits_all): kvg_get_logits(ctx, i). false with a message on bad input.
bool kvg_decode_batch(struct kvg_context * ctx, const kvg_token * tokens, const int32_t * pos, const int32_t * seq_ids,
                      int32_t n, char * err, size_t err_size);
// Logits of the i-th token of the last decode call (i < 0 counts from the end). NULL if
// they were not computed (see kvg_decode_batch), i is out of range or ctx is NULL.
const float * kvg_get_logits(struct kvg_context * ctx, int32_t i);
// Positions decoded so far by sequence 0 / by sequence seq (-1 if seq is invalid or ctx
// NULL). A ring cache holds only the last n_window of them (plus the sinks). n_seq_max: 0
// for a NULL ctx.
int32_t kvg_n_past(const struct kvg_context * ctx);
int32_t kvg_seq_n_past(const struct kvg_context * ctx, int32_t seq);
int32_t kvg_n_seq_max(const struct kvg_context * ctx);

// ---- editing sequences (llama.cpp's llama_memory_seq_* meanings) ----------------------------
// Forgets positions [p0, p1) of sequence seq (p0 < 0: from 0, p1 < 0: to the end). Removing
// a suffix is a rollback: the next token of seq goes at p0, and its logits are those of a
// fresh context fed the kept tokens (bit-identical in f32 and f16 caches when fed in the same
// batches; in other batches the products may round differently, as in ggml). Positions removed
// from the middle are never attended again (the later ones keep their positions). false
// with a message, and nothing changed, for an unknown sequence or p0 > p1, or where the
// result could not be exact: a q8_0 cache cut inside a group of 32 slots other than the two
// it wrote last (those keep their keys in f32: the group written last and the one written
// before it, which after a rollback may lie past the sequence's end, e.g. after 100 tokens
// and a cut at 70 they are 96..127 and 64..95; the message names them; a cut at a multiple
// of 32 is always exact), a ring that no longer holds the window before p0, or a middle
// range of a ring that reaches into the window its next token attends (positions
// n_past - n_window + 1 .. n_past - 1 past the sinks: that token must find them all; a ring
// removes from there a suffix only) (kvg_status: bad input, unsupported, context full).
bool kvg_seq_rm(struct kvg_context * ctx, int32_t seq, int32_t p0, int32_t p1, char * err, size_t err_size);
// Makes dst hold what src holds in [p0, p1) (p1 < 0: to the end). A prefix (p0 <= 0) replaces
// what dst held, and dst continues where the prefix ends; a later range (p0 > 0, linear f32
// and f16 caches) is added to what dst holds, replacing dst's positions there. The rows are shared, not
// copied: pages of the cache that src and dst hold alike are resident once, and a later
// write copies only the page it touches (copy-on-write), so N sequences branching from one
// prompt pay for the prompt once. Exact: dst gives the logits a context fed the same tokens
// gives. src == dst: a prefix of a sequence onto itself is a rollback to that prefix (as
// kvg_seq_rm(ctx, src, p1, -1), with its refusals); the whole sequence or a range with p0 > 0
// onto itself changes nothing. false with a message, nothing changed, for unknown sequences,
// p0 > p1, a ring (whole sequences only), a range with p0 > 0 in a q8_0 or ring cache, or a
// q8_0 prefix cut inside a group other than the two written last (see kvg_seq_rm).
bool kvg_seq_cp(struct kvg_context * ctx, int32_t src, int32_t dst, int32_t p0, int32_t p1, char * err,
                size_t err_size);
// Moves positions [p0, p1) of seq by delta (p0 < 0: from 0, p1 < 0: to the end): their rows
// go to the new positions and their keys are rotated to them (RoPE), so the sequence reads as
// if those tokens had been decoded there (to the rounding of the rotation; the architecture's
// pairs: adjacent for llama, n_rot / 2 apart for qwen2, qwen3, phi3, gemma2, gemma3; each
// layer's rope base and scale (Gemma 3's window layers have their own); the frequency factors
// the context's rope uses; none on smollm3's layers without rope; a pure rotation, without the
// rope's attention factor, so the keys equal those computed there). With kvg_seq_rm of
// a middle range this is llama.cpp's context shift. Linear f32 and f16 caches only (a q8_0 key
// would be rounded again; a ring slides by itself): false with a message (nothing changed)
// otherwise, or if a position would leave [0, n_ctx) or land on one still held.
// Sliding-window models (gemma2, gemma3): the cache keeps every position on every layer, and a
// window layer's mask hides the positions q with pos - q >= the window (llama.cpp's rule), so
// kvg_seq_rm, kvg_seq_cp, kvg_seq_add and the state functions behave as for any model, and a
// rollback may go back anywhere; kvg_seq_add rotates each layer's keys with that layer's rope
// base and scale (Gemma 3's window layers: base 10000, unscaled). A shift that closes a gap
// brings positions that were outside a window back into it (distances are what the mask
// reads), where llama.cpp's smaller window cache may already have dropped them.
bool kvg_seq_add(struct kvg_context * ctx, int32_t seq, int32_t p0, int32_t p1, int32_t delta, char * err,
                 size_t err_size);
// Forgets every sequence but seq (an emptied sequence starts again at position 0). false
// with a message for an unknown sequence.
bool kvg_seq_keep(struct kvg_context * ctx, int32_t seq, char * err, size_t err_size);
// Smallest / largest position sequence seq holds; -1 when it holds none, seq is unknown or
// ctx is NULL. A ring holds only its window and sinks. Always 0 <= pos_min <= pos_max <
// kvg_seq_n_past for a sequence that holds positions; one that holds none has both -1 and
// may still have n_past > 0 (its positions removed as middle ranges): it continues there.
int32_t kvg_seq_pos_min(const struct kvg_context * ctx, int32_t seq);
int32_t kvg_seq_pos_max(const struct kvg_context * ctx, int32_t seq);

// ---- sequence state (prompt caches, saved conversations) ------------------------------------
// A sequence's cache contents as bytes, sized by the positions it holds (not by n_ctx): the
// K/V rows of its held positions (a q8_0 cache: the 32-position groups holding them, the
// group being filled in f32 and the ring's sink rows), its positions, a model tag and a
// checksum. Restoring is exact: the sequence then gives the logits it gave when saved, bit
// for bit. It restores into any sequence of any context of the same model with the same
// cache type and mode (a ring: the same n_ctx, window and sinks; linear: an n_ctx that holds
// its positions, i.e. n_ctx >= its n_past, however many slots it once used before a rollback),
// replacing what that sequence held. Positions are below INT32_MAX in every mode.
// Bytes kvg_state_seq_get needs now; 0 for a NULL ctx or an unknown sequence.
size_t kvg_state_seq_size(const struct kvg_context * ctx, int32_t seq);
// Writes the state into dst; returns the bytes written, or 0 with a message if dst is NULL
// or smaller than kvg_state_seq_size.
size_t kvg_state_seq_get(const struct kvg_context * ctx, int32_t seq, uint8_t * dst, size_t size, char * err,
                         size_t err_size);
// Replaces what sequence seq holds with a state from kvg_state_seq_get. false with a message,
// and seq unchanged, for a state that is truncated, altered (checksum), of another model,
// cache type or mode, that does not fit this context, or whose header or positions are
// inconsistent (a position not in its slot, n_past past INT32_MAX, ...): kvg_status bad input.
bool kvg_state_seq_set(struct kvg_context * ctx, int32_t seq, const uint8_t * src, size_t size, char * err,
                       size_t err_size);
// The state and the tokens that produced it (n_tokens of them) in a file, written to a
// temporary file beside path and renamed over it (a failed save leaves the old file).
bool kvg_state_seq_save_file(const struct kvg_context * ctx, int32_t seq, const char * path, const kvg_token * tokens,
                             int32_t n_tokens, char * err, size_t err_size);
// Restores a file of kvg_state_seq_save_file into seq and copies its tokens to tokens_out
// (at most n_max); returns the token count, or -1 with a message (and seq unchanged) if the
// file cannot be opened or read or is not a regular file (kvg_status io), is not such a file
// or is truncated (bad file), holds more than n_max tokens (bad input), or its state is
// damaged or does not fit (see kvg_state_seq_set). The file's 12-byte header, the state's
// header and the sizes they declare are checked against the file's size and this context
// before the rest is read, so a large file that is not a state (or a state of another model)
// is refused after reading at most 108 bytes.
int32_t kvg_state_seq_load_file(struct kvg_context * ctx, int32_t seq, const char * path, kvg_token * tokens_out,
                                int32_t n_max, char * err, size_t err_size);

// ---- sampling ---------------------------------------------------------------------------------------
// The steps, in order (llama.cpp's meanings): penalties on the recently accepted tokens,
// then greedy (temp <= 0) or top-k, min-p, temperature softmax, top-p and a seeded draw.
struct kvg_sampler_params {
    float temp;    // <= 0: greedy
    int32_t top_k; // <= 0: off
    float top_p;   // >= 1: off
    uint64_t seed;
    float min_p;   // <= 0: off; keeps tokens with probability >= min_p x the top token's
    // Over the last repeat_last_n accepted tokens (-1: all, 0: none): a token seen there has
    // its logit divided by repeat_penalty (multiplied when negative), then lowered by
    // frequency_penalty x its count and by presence_penalty once.
    float repeat_penalty;    // 1: off
    int32_t repeat_last_n;
    float frequency_penalty; // 0: off
    float presence_penalty;  // 0: off
};
// temp 0.8, top-k 40, top-p 0.95, min-p off, penalties off (repeat_last_n 64)
struct kvg_sampler_params kvg_sampler_default_params(void);
struct kvg_sampler * kvg_sampler_new(struct kvg_sampler_params params); // NULL if out of memory
void kvg_sampler_free(struct kvg_sampler * sampler);
// Samples a token and accepts it (as llama.cpp's llama_sampler_sample); works on every kind of
// sampler. A chain or stage runs on logits[0..n_vocab) as candidates in id order and returns
// the token at `selected`; when no stage selected one (no greedy or dist stage) it returns the
// best candidate left: highest logit (NaN below all), lowest id on ties, a greedy fallback.
// -1 if sampler or logits is NULL or n_vocab <= 0.
kvg_token kvg_sampler_sample(struct kvg_sampler * sampler, const float * logits, int32_t n_vocab);
// Tells the penalties about a token of the text that was not sampled (the prompt's); a chain
// passes it to every stage.
void kvg_sampler_accept(struct kvg_sampler * sampler, kvg_token token);
// Forgets the accepted tokens and restarts the random numbers from the seed (every stage of a chain).
void kvg_sampler_reset(struct kvg_sampler * sampler);

// ---- sampler chains (llama.cpp's llama_sampler_chain_* and llama_sampler_init_*) ----------------
// A chain runs its stages in the order added on an array of candidates; each stage narrows or
// rescores it and greedy / dist pick one. The chain penalties, top_k, min_p, temp, top_p,
// dist(seed) draws exactly the tokens kvg_sampler_new draws with the same params and seed.
// Every kvg_sampler_init_* returns a stage to add to a chain or to use alone (any kvg_sampler_*
// function takes it); NULL only if out of memory.
struct kvg_token_data {
    kvg_token id;
    float logit;
    float p;       // probability, written by top_p (before its cut) and dist; else left as is
};
struct kvg_token_data_array {
    struct kvg_token_data * data;
    size_t size;
    int64_t selected; // index into data of the chosen candidate, -1: none
    bool sorted;      // data is in logit-descending order (stages keep this up to date)
};
struct kvg_sampler * kvg_sampler_chain_new(void); // empty chain; NULL if out of memory
// Appends stage to chain, which then owns it: do not use or free the stage afterwards. false
// (and the caller keeps the stage) if chain is NULL or not a chain, stage is NULL, from
// kvg_sampler_new or the chain itself, or out of memory. A chain may be added to another.
bool kvg_sampler_chain_add(struct kvg_sampler * chain, struct kvg_sampler * stage);
// Number of stages in chain; -1 if chain is NULL or not a chain.
int32_t kvg_sampler_chain_n(const struct kvg_sampler * chain);
// Selects the highest logit (lowest id on ties, NaN skipped).
struct kvg_sampler * kvg_sampler_init_greedy(void);
// Draws from the softmax of the candidates left (at the temperature of earlier temp stages),
// writes their p and sets selected; one random number per draw from splitmix64 seeded with
// seed (reset restarts it). If the top logit is +inf or no logit is finite it selects the best
// candidate without drawing. Unlike llama.cpp, no seed value means "random".
struct kvg_sampler * kvg_sampler_init_dist(uint64_t seed);
// Keeps the k highest logits (ties: lower id) and sorts them; k <= 0 or k >= size: off.
struct kvg_sampler * kvg_sampler_init_top_k(int32_t k);
// Keeps the smallest most-probable set whose probability reaches p, at least min_keep (and
// one) tokens, sorted; p >= 1 (or NaN): off; p <= 0 keeps max(1, min_keep).
struct kvg_sampler * kvg_sampler_init_top_p(float p, size_t min_keep);
// Keeps the tokens with probability >= p x the top token's (p above 1 counts as 1), in their
// order; if fewer than min_keep pass, the min_keep most probable, sorted. p <= 0 (or NaN): off.
struct kvg_sampler * kvg_sampler_init_min_p(float p, size_t min_keep);
// Divides the logits by t; t <= 0 (or NaN) keeps only the best candidate (the array shrinks to
// it; llama.cpp instead sets the other logits to -inf).
struct kvg_sampler * kvg_sampler_init_temp(float t);
// On the tokens accepted so far (kvg_sampler_accept / _sample), the last last_n of them (-1,
// or any negative: all; 0: off): a token seen there has its logit divided by repeat
// (multiplied when <= 0), then lowered by freq x its count and by present once. repeat 1,
// freq 0 and present 0: off. Marks the array unsorted.
struct kvg_sampler * kvg_sampler_init_penalties(int32_t last_n, float repeat, float freq, float present);
// Runs a chain or stage on cur_p (selected is reset to -1 first; the array shrinks in place,
// its first size entries are the candidates left) and divides the logits by any temperature.
// false if sampler or cur_p is NULL, cur_p->data is NULL with size > 0, sampler is from
// kvg_sampler_new (it has no stages: use kvg_sampler_sample) or out of memory.
bool kvg_sampler_apply(struct kvg_sampler * sampler, struct kvg_token_data_array * cur_p);
// Index of the largest logit (the first of ties); -1 if logits is NULL or n_vocab <= 0.
kvg_token kvg_argmax(const float * logits, int32_t n_vocab);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
