// Grouped K of a q8_0 KV cache: everything that keeps keys exact around the q8_0 groups.
//
// The cache stores K by channel (kv-cache.h): k[il] is [32, n_embd_kv * n_groups(n_ctx) * n_seq],
// row ((s * n_groups + g) * n_embd_kv + c) = channel c of slots [32g, 32g + 32) of sequence s,
// one q8_0 block. A block's scale is fixed by its widest value, so a group is quantized only
// once it is complete; until then, and whenever going back into it must be exact, its keys
// live in f32 here:
//
//   k_recent[il] [n_embd_kv, 32 * n_seq]  the open group of each sequence (row s * 32 + slot % 32);
//                                         attention reads it instead of its q8_0 copy, and each
//                                         graph re-quantizes it into k[il]
//   prev   [n_layer][n_seq][32][n_embd_kv] the group each sequence left last: a rollback of up
//                                         to a group reloads exact keys, not their q8_0 copy
//   sinks  [n_layer][n_seq][n_sink][n_embd_kv] a ring's sink slots, never rewritten: restored
//                                         when their group is reloaded, so they do not drift
//
// KvKeyGroups owns these copies and each sequence's open / last-left group; it reads and
// writes the cache's q8_0 K tensors (owned by KvCache). Inactive (no copies, nothing to do)
// when the cache is not q8_0; the per-sequence group numbers are kept either way (-1: none).
#pragma once

#include "ggml.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kvg {

class KvKeyGroups {
public:
    // The cache's geometry as the groups need it.
    struct Shape {
        int n_seq = 1, n_ctx = 0, n_sink = 0, n_embd_kv = 0;
    };
    // What a batch needs to undo its group changes; kept across batches (allocates once).
    struct Undo {
        std::vector<int> group;  // per sequence: its open group at begin
        std::vector<char> saved; // per sequence: its k_recent rows at begin are in rows
        std::vector<float> rows; // [n_seq][n_layer][32 * n_embd_kv]
    };

    // Groups covering n_slots slots.
    static int n_groups(int64_t n_slots) { return (int) ((n_slots + GGML_KV_GROUP - 1) / GGML_KV_GROUP); }
    // Bytes of the f32 copies of an active instance of n_layer layers (what init allocates).
    static size_t bytes_for(size_t n_layer, const Shape & shape);

    // k_groups: the cache's grouped q8_0 K tensor of each layer, or empty (inactive). The
    // k_recent tensors are created in ctx (tensor structs only) over memory owned here.
    void init(ggml_context * ctx, const std::vector<ggml_tensor *> & k_groups, const Shape & shape);
    bool active() const { return !recent_.empty(); }
    size_t bytes() const; // the f32 copies
    void clear();         // every copy zero, no sequence has a group

    // ---- per sequence ----
    // The group attention reads from k_recent (group 0 before any is open: the graph
    // re-quantizes it from zeros, which no visible slot reads).
    int recent_group(int seq) const { return std::max(seqs_[seq].recent, 0); }
    int open_group(int seq) const { return seqs_[seq].recent; } // -1: none
    int prev_group(int seq) const { return seqs_[seq].prev; }   // -1: none
    // Can seq's keys be cut at slot exactly (a group start, or a group kept in f32)?
    bool exact_cut(int seq, int64_t slot) const;
    std::string exact_groups(int seq) const; // for messages: "slots 96..127 and 64..95" or "none"
    // Slots after `slot` in its group (the cache's last slot ends the last group).
    int64_t slots_after(int64_t slot) const {
        return std::min<int64_t>(slot | (GGML_KV_GROUP - 1), shape_.n_ctx - 1) - slot;
    }
    int64_t recent_row(int seq, int64_t slot) const { return (int64_t) seq * GGML_KV_GROUP + slot % GGML_KV_GROUP; }
    // k_recent holds slot's group: loaded from the q8_0 copy (or prev) if another was open.
    void use(int seq, int64_t slot) {
        if (active() && seqs_[seq].recent != (int) (slot / GGML_KV_GROUP)) load(seq, (int) (slot / GGML_KV_GROUP));
    }
    void copy_seq(int src, int dst); // dst's groups and their f32 rows become src's

    // ---- graph ----
    ggml_tensor * recent(int il) const { return recent_[il]; } // k_recent[il]
    // The q8_0 groups [32, n_embd_kv, n_groups(n_kv), n_seq] and the f32 open groups
    // [n_embd_kv, 32, n_seq] of layer il, for attention.
    ggml_tensor * view_groups(ggml_context * ctx, int il, int n_kv) const;
    ggml_tensor * view_recent(ggml_context * ctx, int il) const;
    // Writes cur [n_embd_kv, n_tokens] at k_recent rows idx, then re-quantizes each sequence's
    // open group into k[il] at group_rows (fill_group_rows); returns the last write.
    ggml_tensor * write(ggml_context * ctx, int il, ggml_tensor * cur, ggml_tensor * idx,
                        ggml_tensor * group_rows) const;
    void fill_group_rows(int64_t * rows) const; // [n_embd_kv * n_seq]: k[il] rows of each open group

    // ---- batches (KvCache::begin_batch / commit_batch / rollback_batch) ----
    void begin(Undo * u);                   // until end(), a group leaving k_recent is saved in u first
    void end() { open_ = nullptr; }         // the batch is committed or being rolled back
    void rollback(int seq, const Undo & u); // after end(): seq's open group and its f32 rows as at begin

    // ---- state (kv-state.cpp) ----
    // The grouped part of a state: the q8_0 blocks of `groups` (ascending), then the open
    // group's, the last-left group's and the sinks' f32 rows; empty when inactive.
    size_t state_bytes(int64_t n_groups, bool open_group, bool prev_group) const;
    void state_write(int seq, const std::vector<int64_t> & groups, std::vector<uint8_t> * out) const;
    // Reads what state_write wrote (checked before), the state's groups being recent and prev;
    // groups past this cache's n_ctx are dropped. p: where state_write's part starts.
    void state_read(int seq, int recent, int prev, const std::vector<int64_t> & groups, const uint8_t * p);

private:
    struct SeqGroups {
        int recent = -1; // the group whose rows k_recent holds
        int prev = -1;   // the group whose exact f32 rows prev_ holds (the one left last)
    };
    void load(int seq, int group);
    void swap_sinks(int seq, int group, bool save);
    void save(int seq);
    void reopen_first_group(int seq);
    size_t group_floats() const { return (size_t) GGML_KV_GROUP * shape_.n_embd_kv; }
    // Where seq's rows of layer il start: in recent_mem_ and prev_ (the same layout), in sinks_.
    size_t group_offset(size_t il, int seq) const { return (il * shape_.n_seq + seq) * group_floats(); }
    size_t sink_offset(size_t il, int seq) const {
        return (il * shape_.n_seq + seq) * shape_.n_sink * shape_.n_embd_kv;
    }

    Shape shape_;
    std::vector<ggml_tensor *> k_;      // the cache's q8_0 K tensors (not owned)
    std::vector<ggml_tensor *> recent_; // k_recent[il], over recent_mem_
    std::vector<float> recent_mem_, prev_, sinks_;
    std::vector<SeqGroups> seqs_;
    Undo * open_ = nullptr; // the batch being run, if any
};

} // namespace kvg
