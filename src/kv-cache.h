// The KV cache: per layer one K and one V tensor whose rows are (sequence, slot) pairs,
// one row = all KV heads of one position:
//
//   k[il], v[il]: [n_embd_kv = head_dim * n_head_kv, n_seq * n_ctx], type f32, f16 or q8_0
//   sequence s owns rows [s * n_ctx, (s + 1) * n_ctx)
//
// A q8_0 cache stores K by channel instead (grouped): k[il] is
// [32, n_embd_kv * n_groups * n_seq], row ((s * n_groups + g) * n_embd_kv + c) = channel c
// of slots [32g, 32g + 32) of sequence s, one q8_0 block with its own scale. Keys differ
// by channel far more than by position, and heads of tiny models (8 values) are shorter
// than a block, so per-position rows lose most of their 8 bits to the widest channel.
// The group being filled also lives in f32 (k_recent), which attention reads instead of its
// q8_0 copy; each graph re-quantizes that group into k[il] (so the q8_0 copy is complete when
// the group is left). Those f32 copies, of the group left last and of a ring's sinks, and the
// rules that keep keys exact around groups, are KvKeyGroups (kv-group.h). V stays per
// position: q8_0 rows of v[il].
//
// Modes (which slot a position goes to, who may see it):
//   linear  slot = position, positions < n_ctx; a token sees every earlier position.
//   ring    slot = position mod the ring (after n_sink fixed slots for the first positions);
//           positions are unbounded, a token sees the last n_window positions (itself
//           included) plus the sinks. RoPE keeps the true positions.
//
// Residency: the buffers are one anonymous mapping reserved for the whole cache and never
// moved; a page becomes resident when a row in it is first written. Rows of one sequence
// are in position order from the start of its range, so the first p positions are a
// prefix of each layer's K and V: resident memory grows with the tokens written.
//
// New rows are written with ggml_set_rows at row indices that are a graph input. The host
// side (slot_pos) remembers which position each slot holds; it builds the attention mask
// and each sequence's valid length (slots [0, n_used) were written at least once).
//
// A batch changes the cache in three steps (as llama.cpp's find-slot / apply / commit):
//   begin_batch  checks that each sequence can continue where the batch starts it and that
//                the tokens fit, snapshots the host state, forgets the positions replaced;
//   apply        per token, in order, before the graph that writes it is filled;
//   commit_batch after every graph ran, or rollback_batch when one failed: the host state
//                comes back as at begin_batch, minus the positions the batch replaced (a
//                slot the batch overwrote is never claimed as held), with the grouped-K
//                group being filled restored exactly (its f32 rows are saved if the batch
//                moves to another group).
#pragma once

#include "ggml.h"
#include "kv-group.h"
#include "kv-pages.h"
#include "model.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kvg {

enum class KvMode { Linear, Ring };

struct KvCacheParams {
    int n_ctx = 0; // slots per sequence
    int n_seq = 1;
    ggml_type type = GGML_TYPE_F32;
    KvMode mode = KvMode::Linear;
    int n_window = 0;    // ring: positions a token attends besides the sinks; 0 = n_ctx - n_sink
    int n_sink = 0;      // ring: the first n_sink positions stay in the cache
    bool commit = false; // touch every page at creation (static residency, the old behaviour)
    size_t max_bytes = 0; // init fails if bytes_for() exceeds this (0: no limit)
};

class KvCache {
public:
    KvCache() = default;
    ~KvCache();
    KvCache(const KvCache &) = delete;
    KvCache & operator=(const KvCache &) = delete;

    // false + message if a parameter is invalid or the reservation fails.
    bool init(const HParams & hp, const KvCacheParams & p, std::string * err);
    bool init(const HParams & hp, int n_ctx, ggml_type type, std::string * err); // linear, one sequence

    int n_ctx() const { return n_ctx_; } // slots per sequence
    int n_seq() const { return n_seq_; }
    ggml_type type() const { return type_; }
    int n_layer() const { return (int) k_.size(); }
    int n_embd_kv() const { return n_embd_kv_; }
    // Layer il's K tensor (grouped: by channel, see above) and V tensor, over the cache's memory.
    ggml_tensor * k_tensor(int il) const { return k_[il]; }
    ggml_tensor * v_tensor(int il) const { return v_[il]; }

    // Slot of position pos inside a sequence's range, and the buffer row of (seq, pos).
    int64_t slot(int64_t pos) const {
        if (mode_ == KvMode::Linear || pos < n_sink_) return pos;
        return n_sink_ + (pos - n_sink_) % (n_ctx_ - n_sink_);
    }
    int64_t row(int seq, int64_t pos) const { return (int64_t) seq * n_ctx_ + slot(pos); }

    // Slots [0, n_kv) of every sequence of layer il, for attention: [head_dim, n_kv, n_head_kv, n_seq]
    // (heads strided inside a row), or with packed = true whole rows [n_embd_kv, n_kv, 1, n_seq]
    // (quantized rows, whose heads may be shorter than a block).
    ggml_tensor * view_k(ggml_context * ctx, int il, int n_kv, bool packed) const {
        return view(ctx, k_[il], n_kv, packed);
    }
    ggml_tensor * view_v(ggml_context * ctx, int il, int n_kv, bool packed) const {
        return view(ctx, v_[il], n_kv, packed);
    }

    // Writes cur [n_embd_kv, n_tokens] (f32) of layer il at rows idx (I64 [n_tokens]): row(seq,
    // pos) of each token, or for grouped K recent_row(seq, pos) of k_recent, after which the
    // recent group of every sequence is re-quantized into k[il] (group_rows: I64
    // [n_embd_kv * n_seq], see KvKeyGroups::fill_group_rows); returns the last write.
    ggml_tensor * write_k(ggml_context * ctx, int il, ggml_tensor * cur, ggml_tensor * idx, ggml_tensor * group_rows) const;
    ggml_tensor * write_v(ggml_context * ctx, int il, ggml_tensor * cur, ggml_tensor * idx) const;

    // Grouped K (q8_0): the f32 copies and the groups each sequence keeps exact (kv-group.h);
    // inactive otherwise.
    bool grouped() const { return groups_.active(); }
    const KvKeyGroups & groups() const { return groups_; }
    int64_t recent_row(int seq, int64_t pos) const { return groups_.recent_row(seq, slot(pos)); }
    void use_group(int seq, int64_t pos) {
        groups_.use(seq, slot(pos));
    } // k_recent holds pos's group (apply() calls it)

    // ---- host-side state of the sequences ----
    // One batch's change, from begin_batch to commit_batch / rollback_batch.
    // Everything a rollback needs: positions from `first` on were forgotten at begin_batch
    // and every slot the batch writes holds one of them, so forgetting them again undoes the
    // slots; the rest is a few numbers and, if the batch left it, the group being filled.
    // Kept across batches, so that a batch allocates nothing once the vectors have grown.
    struct Batch {
        std::vector<int64_t> first, last; // per sequence: its first/last position in the batch, -1: none
        std::vector<int> n_used;          // per sequence: Seq::n_used at begin_batch
        KvKeyGroups::Undo groups;         // grouped K: the open groups at begin_batch
    };
    // Token i of the batch is at position pos[i] of sequence seq[i] (valid ids; consecutive
    // positions per sequence, in order). false + message if a sequence cannot continue at its
    // first position (kvg_status context full if a linear cache has no room or a ring no
    // longer holds the window), and nothing changes.
    bool begin_batch(const int32_t * pos, const int32_t * seq, int n, Batch * b, std::string * err);
    // The next graph writes pos (call in token order, before the graph's inputs are set).
    // Grouped K: if pos's group is not the sequence's recent group, its rows are first loaded
    // into k_recent from the q8_0 copy (slots still held there, e.g. after a rewind or a ring
    // wrap, stay readable).
    void apply(int seq, int64_t pos);
    void commit_batch(Batch * b);
    void rollback_batch(Batch * b);

    // Can sequence seq continue at pos? pos <= n_past, and (ring) the window before pos is held.
    bool check_start(int seq, int64_t pos, std::string * err) const;
    // Last position one graph chunk starting at pos may write, so that no write replaces a
    // slot that a token of the same chunk still attends (ring; linear: n_ctx - 1), and
    // (grouped K) so that the chunk stays inside one group of slots.
    int64_t chunk_last(int64_t pos) const;
    void rewind(int seq, int64_t pos); // forget positions >= pos
    // Forget positions [p0, p1) of seq (p1 past n_past: a suffix, the next token goes at p0).
    // Refused with a message (nothing changes) where the result would not be exact: a q8_0
    // cache cut inside a 32-slot group other than the open and the last-left one (the two
    // written last; only they keep f32 keys), a ring that no longer holds the window before
    // p0, or a ring's middle range inside the window of its next token (which check_start
    // requires whole).
    bool remove(int seq, int64_t p0, int64_t p1, std::string * err);
    void keep_only(int seq);             // forget every other sequence
    // dst (emptied first) holds src's positions [0, p1) (p1 past src's: all of them), reading
    // src's pages where they align (copy-on-write: a later write copies only the page it
    // touches) and copies of the rest. Refused with a message (nothing changes) where the
    // copy would not be exact or is not a prefix: a ring copies whole sequences only; a q8_0
    // cache cuts at a multiple of 32 or inside src's last two groups. src == dst: a prefix is
    // remove(src, p1, end), the whole sequence a no-op.
    bool copy_seq(int src, int dst, int64_t p1, std::string * err);
    // dst also holds src's positions [p0, p1) (p0 > 0; what dst held there is replaced, the rest
    // kept), sharing pages as copy_seq does. Linear f32/f16 caches (a q8_0 group or a ring slot
    // would mix the two sequences' rows): refused with a message otherwise.
    bool copy_range(int src, int dst, int64_t p0, int64_t p1, std::string * err);
    // Positions [p0, p1) of seq move by delta: their rows move to the new slots and their keys
    // are rotated by delta (RoPE on hp.rope_mode's pairs over the first hp.n_rot values of each head,
    // with each layer's base and frequency scale and the frequency factors [n_rot / 2] if not null, as
    // the decode graph applies it), in double precision. Linear f32/f16 caches only (a q8_0
    // key cannot be rotated without rounding it again; a ring slides by itself), no YaRN.
    // Refused, nothing changed, if a position would leave [0, n_ctx) or land on one seq still
    // holds outside the range.
    bool shift(int seq, int64_t p0, int64_t p1, int64_t delta, const HParams & hp, const float * factors,
               std::string * err);
    int64_t pos_min(int seq) const;      // smallest position held, -1 if none
    int64_t pos_max(int seq) const;      // largest position held, -1 if none

    // ---- state of one sequence as bytes (kv-state.cpp) ----
    // What seq holds, sized by the positions it holds (not by n_ctx): its host state, the K
    // and V rows of its held slots (grouped K: the q8_0 groups holding them, the open group's
    // f32 rows and the sinks'), tagged with model_id and the cache's type and mode, and a
    // checksum. state_read puts it into sequence seq of a cache of the same model, type and
    // mode (a ring: the same n_ctx, window and sinks; linear: n_ctx large enough), replacing
    // what seq held; everything is checked first, and on failure nothing changes.
    void state_write(int seq, uint64_t model_id, std::vector<uint8_t> * out) const;
    size_t state_size(int seq) const; // bytes state_write would write now, without writing them
    bool state_read(int seq, uint64_t model_id, const uint8_t * src, size_t size, std::string * err);
    // A state file's state judged before it is read: its header (the first state_header_bytes()
    // of n) and its total size, checked as state_read checks them, all but the checksum.
    static size_t state_header_bytes();
    bool state_header_fits(const uint8_t * head, size_t n, uint64_t size, uint64_t model_id, std::string * err) const;
    // May a token of seq at position pos attend slot j? window > 0: a sliding-window layer's
    // question (llama.cpp's rule: pos - q < window).
    bool visible(int seq, int j, int64_t pos, int64_t window = 0) const {
        const int64_t q = seqs_[seq].held(j);
        return q >= 0 && q <= pos && (mode_ == KvMode::Linear || q < n_sink_ || q > pos - n_window_) &&
               (window <= 0 || pos - q < window);
    }
    int kv_len(int seq) const { return seqs_[seq].n_used; }
    int64_t n_past(int seq) const { return seqs_[seq].n_past; }

    size_t bytes() const;         // K + V of all layers (what a static cache keeps resident)
    // What bytes() will be after init(hp, p), computed without allocating (p must be valid).
    static size_t bytes_for(const HParams & hp, const KvCacheParams & p);
    void clear();                 // forget all positions; pages are given back (dynamic residency)

private:
    struct Seq {
        int64_t n_past = 0; // positions [0, n_past) were decoded (ring: the recent ones are held)
        int n_used = 0;     // slots [0, n_used) were written at least once: the valid length
        // position each slot holds; slots at or past its size hold none (it grows with the
        // slots written, so a huge n_ctx costs nothing until tokens arrive)
        std::vector<int64_t> slot_pos;
        int64_t held(int64_t j) const { return j < (int64_t) slot_pos.size() ? slot_pos[j] : -1; }
    };

    bool reserve(std::string * err);
    bool make_tensors(int n_layer, size_t k_stride, size_t v_stride, std::string * err);
    ggml_tensor * view(ggml_context * ctx, ggml_tensor * t, int n_kv, bool packed) const;
    struct StateHeader;
    bool state_check(const StateHeader & h, uint64_t model_id, std::string * err) const;
    // Bytes of a state holding n_held slots in n_groups groups (grouped K), with the open and
    // the last-left group's f32 rows if those groups exist: the one layout formula.
    size_t state_bytes(int64_t n_held, int64_t n_groups, bool open_group, bool prev_group) const;
    // Byte ranges of sequence seq's slots [a, b) in tensor t, relative to mem: V rows and
    // (not grouped) K rows; grouped K: the channel rows of the groups holding those slots.
    size_t slot_offset(const ggml_tensor * t, int seq, int64_t a) const;
    size_t slot_bytes(const ggml_tensor * t, int64_t a, int64_t b) const;
    bool is_k(const ggml_tensor * t) const; // one of k (grouped: by channel), not v
    void own_rows(int seq, int64_t slot); // the pages the next write of slot touches become seq's own

    ggml_context * ctx_ = nullptr; // tensor structs only: the bytes live in `mem_`
    SharedPages pages_;            // the bytes of k and v; sequences may share pages (copy_seq)
    void * mem_ = nullptr;         // pages_.base(): the shared-page mapping (kv-pages.h)
    size_t mem_size_ = 0;
    ggml_type type_ = GGML_TYPE_F32;
    KvMode mode_ = KvMode::Linear;
    int n_ctx_ = 0, n_seq_ = 1, n_window_ = 0, n_sink_ = 0;
    int head_dim_ = 0;
    int n_head_kv_ = 0;
    int n_embd_kv_ = 0;
    bool commit_ = false;
    std::vector<ggml_tensor *> k_, v_;
    KvKeyGroups groups_;
    std::vector<Seq> seqs_;
};

} // namespace kvg
