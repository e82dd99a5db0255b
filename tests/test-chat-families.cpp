// kvg-generate -cnv through a pipe on a tiny model of each chat template's family (the family
// twin's models of tests/family-common.h): llama3 (Llama 3's vocabulary), chatml (Qwen2's),
// phi3 (Phi-3's), gemma and mistral-v1 (Llama 2's SentencePiece vocabulary, whose end of turn
// is </s>: it has no <end_of_turn>).
//
// Random weights rarely say the end-of-turn token, so each model's output row of that token is
// replaced by a multiple of another token's row, chosen from the unedited model's logits so that
// the end of turn loses at the first reply token and wins at the second: logits are linear in
// the output rows, so both margins are known before the edit, and the edit changes nothing else.
// Turn one's reply is then one token, ended by the end-of-turn token; turn two must decode only
// its new tokens (--verbose's counts) and give the reply that a fresh context, fed the whole
// conversation and decoding greedily, gives. --prompt-cache resumes a conversation in a second run.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "family-common.h"
#include "generate-run-common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using family_twin::Family;
using generate_run::generate;
using generate_run::generate_path;
using generate_run::number_after;
using generate_run::Run;

struct ChatCase {
    const char * tmpl;
    const char * family;
    const char * vocab_file; // "": the family's
    const char * eot;        // the end-of-turn token's text
};

const std::string kSys = "You answer in one word.", kUser1 = "What is the capital of France?", kUser2 = "And of Italy?";
const int kMaxReply = 8; // -n

// The model and a context as kvg-generate -cnv makes them (-t 1 -c 512, f32 cache, flash).
struct Loaded {
    kvg_model * model = nullptr;
    kvg_context * ctx = nullptr;
    explicit Loaded(const std::string & path) {
        char err[512] = "";
        model = kvg_model_load(path.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
        INFO(err);
        REQUIRE(model != nullptr);
        kvg_context_params cp = kvg_context_default_params();
        cp.n_ctx = 512;
        cp.n_threads = 1;
        cp.kv_type = KVG_KV_F32;
        cp.attn = KVG_ATTN_FLASH;
        ctx = kvg_context_new(model, cp, err, sizeof err);
        REQUIRE(ctx != nullptr);
    }
    ~Loaded() {
        kvg_context_free(ctx);
        kvg_model_free(model);
    }
    Loaded(const Loaded &) = delete;
    Loaded & operator=(const Loaded &) = delete;
};

std::string format(const char * tmpl, const std::vector<std::string> & contents) {
    static const char * const roles[] = {"system", "user", "assistant", "user"};
    std::vector<kvg_chat_message> msgs;
    for (size_t i = 0; i < contents.size(); ++i) msgs.push_back({roles[i], contents[i].c_str()});
    std::string text(8192, '\0');
    const int32_t n = kvg_chat_apply_template(nullptr, tmpl, msgs.data(), msgs.size(), true, &text[0],
                                              (int32_t) text.size(), nullptr, 0);
    REQUIRE(n > 0);
    REQUIRE(n < (int32_t) text.size());
    text.resize((size_t) n);
    return text;
}

// As -cnv reads a conversation: BOS where the file adds one, control-token text as the tokens.
std::vector<kvg_token> tokens(const kvg_model * model, const std::string & text, bool add_bos = true) {
    std::vector<kvg_token> out((size_t) -kvg_tokenize_special(model, text.c_str(), add_bos, true, nullptr, 0));
    REQUIRE(kvg_tokenize_special(model, text.c_str(), add_bos, true, out.data(), (int32_t) out.size()) ==
            (int32_t) out.size());
    return out;
}

std::string piece(const kvg_model * model, kvg_token prev, kvg_token tok) {
    char buf[256];
    const int32_t n = kvg_token_to_piece(model, prev, tok, buf, sizeof buf);
    REQUIRE(n >= 0);
    return std::string(buf, (size_t) n);
}

int argmax(const std::vector<float> & v) { return (int) (std::max_element(v.begin(), v.end()) - v.begin()); }

std::vector<float> decode(Loaded & m, const std::vector<kvg_token> & toks, int32_t pos) {
    char err[512] = "";
    const float * l = kvg_decode(m.ctx, toks.data(), (int32_t) toks.size(), pos, err, sizeof err);
    INFO(err);
    REQUIRE(l != nullptr);
    return std::vector<float>(l, l + kvg_model_n_vocab(m.model));
}

// A fresh context fed the whole conversation, greedy: the reply's text (pieces after the
// prompt's last token, as -cnv prints them) and whether it ended at an end-of-generation token.
std::string fresh_reply(const std::string & model_path, const std::vector<kvg_token> & prompt, bool * eog) {
    Loaded m(model_path);
    std::vector<float> logits = decode(m, prompt, 0);
    std::string text;
    kvg_token prev = prompt.back();
    *eog = false;
    for (int n = 0; n < kMaxReply; ++n) {
        const kvg_token tok = argmax(logits);
        if ((*eog = kvg_token_is_eog(m.model, tok))) break;
        text += piece(m.model, prev, tok);
        prev = tok;
        logits = decode(m, {tok}, (int32_t) (prompt.size() + n));
    }
    return text;
}

// Copies the model at src to dst with output row `eot` = scale x output row k (the tied
// embedding's rows when the file has no output.weight: it then gets one).
void write_edited(const std::string & src, const std::string & dst, kvg_token eot, int k, float scale) {
    ggml_context * data = nullptr;
    gguf_init_params gp = {false, &data};
    gguf_context * in = gguf_init_from_file(src.c_str(), gp);
    REQUIRE(in != nullptr);
    gguf_context * out = gguf_init_empty();
    gguf_set_kv(out, in);
    ggml_tensor * output = ggml_get_tensor(data, "output.weight");
    ggml_init_params ip = {ggml_tensor_overhead(), nullptr, true};
    ggml_context * extra = ggml_init(ip);
    std::vector<float> untied;
    if (!output) { // a copy of the embedding, as llama.cpp reads a tied file
        const ggml_tensor * embd = ggml_get_tensor(data, "token_embd.weight");
        REQUIRE(embd != nullptr);
        REQUIRE(embd->type == GGML_TYPE_F32);
        untied.assign((const float *) embd->data, (const float *) embd->data + ggml_nelements(embd));
        output = ggml_new_tensor_2d(extra, GGML_TYPE_F32, embd->ne[0], embd->ne[1]);
        ggml_set_name(output, "output.weight");
        output->data = untied.data();
    }
    REQUIRE(output->type == GGML_TYPE_F32);
    float * w = (float *) output->data;
    const int64_t e = output->ne[0];
    for (int64_t i = 0; i < e; ++i) w[eot * e + i] = scale * w[k * e + i];
    for (int64_t t = 0; t < gguf_get_n_tensors(in); ++t) {
        const std::string name = gguf_get_tensor_name(in, t);
        if (name != "output.weight") gguf_add_tensor(out, ggml_get_tensor(data, name.c_str()));
    }
    gguf_add_tensor(out, output);
    REQUIRE(gguf_write_to_file(out, dst.c_str(), false));
    gguf_free(out);
    gguf_free(in);
    ggml_free(extra);
    ggml_free(data);
}

// What the edit is chosen from: turn one's tokens, its first reply token and the end of turn.
struct TurnOne {
    std::vector<kvg_token> prompt;
    kvg_token first = -1, eot = -1;
    std::string first_text;
};

// Writes the family's model to path with the end of turn winning after the first reply token.
TurnOne write_eot_model(const Family & f, const ChatCase & c, const std::string & base, const std::string & path) {
    family_twin::write_model(f, base);
    TurnOne t;
    int k = -1;
    float scale = 0;
    {
        Loaded m(base);
        const std::vector<kvg_token> eot = tokens(m.model, c.eot, false);
        REQUIRE(eot.size() == 1);
        t.eot = eot[0];
        REQUIRE_MESSAGE(kvg_token_is_eog(m.model, t.eot), c.eot << " does not end a turn");
        t.prompt = tokens(m.model, format(c.tmpl, {kSys, kUser1}));
        const std::vector<float> one = decode(m, t.prompt, 0);
        t.first = argmax(one);
        REQUIRE(!kvg_token_is_eog(m.model, t.first));
        t.first_text = piece(m.model, t.prompt.back(), t.first);
        const std::vector<float> two = decode(m, {t.first}, (int32_t) t.prompt.size());
        // k: negative at the first reply token (so the end of turn stays below its winner),
        // the largest at the second
        for (int i = 0; i < (int) two.size(); ++i) {
            if (i != t.eot && one[(size_t) i] < 0 && (k < 0 || two[(size_t) i] > two[(size_t) k])) k = i;
        }
        REQUIRE(k >= 0);
        REQUIRE(two[(size_t) k] > 0);
        const float top = two[(size_t) argmax(two)];
        scale = (top + std::max(1.0f, 0.5f * std::fabs(top))) / two[(size_t) k];
    }
    write_edited(base, path, t.eot, k, scale);
    return t;
}

std::vector<std::string> cnv_args(const std::string & model, const char * tmpl) {
    const std::string n = std::to_string(kMaxReply);
    return {"-m", model,  "--temp",          "0",  "-t",   "1",  "-c",       "512", "-n",
            n,    "-cnv", "--chat-template", tmpl, "-sys", kSys, "--verbose"};
}

} // namespace

namespace {

// What one -cnv run of the two turns showed: the replies and the counts --verbose printed.
struct TwoTurns {
    std::string model, reply2;
    long held1 = -1, decoded2 = -1;
};

// Runs the two turns through a pipe and checks them against the model's own tokens and a fresh
// run; returns what the resume test compares with. Skips (model "") without the vocabulary.
TwoTurns check_template(const ChatCase & c, const std::string & model) {
    TwoTurns r;
    Family f = family_twin::family(c.family);
    if (*c.vocab_file) f.vocab_file = c.vocab_file;
    if (family_twin::vocab_path(f).empty()) {
        MESSAGE(std::string(c.tmpl) << ": " << f.vocab_file
                                    << " is in neither ../shared/vocab nor $LLAMA_CPP_MODELS: skipped");
        return r;
    }
    if (generate_path().empty()) {
        MESSAGE("kvg-generate not built: skipped (set KVG_GENERATE to its path)");
        return r;
    }
    const family_twin::TempFile base{temp_path("chatfam", std::string(c.tmpl) + "-base.gguf")};
    const TurnOne t = write_eot_model(f, c, base.path, model);
    const Run run = generate(cnv_args(model, c.tmpl), kUser1 + "\n" + kUser2 + "\n");
    INFO(run.err);
    REQUIRE(run.code == 0);
    // Turn one: all its tokens decoded, one reply token, then the end of turn.
    CHECK(number_after(run.err, "[turn 1: ") == (long) t.prompt.size());
    REQUIRE(run.err.find("[reply: end of turn; the cache holds ") != std::string::npos);
    r.held1 = number_after(run.err, "[reply: end of turn; the cache holds ");
    CHECK(r.held1 == (long) t.prompt.size() + 1);
    REQUIRE(run.out.compare(0, t.first_text.size() + 1, t.first_text + "\n") == 0);
    REQUIRE(run.out.size() > t.first_text.size() + 1);
    REQUIRE(run.out.back() == '\n');
    r.reply2 = run.out.substr(t.first_text.size() + 1, run.out.size() - t.first_text.size() - 2);

    // Turn two decodes only what follows the cache: the whole conversation's tokens start with
    // turn one's and its reply token, and the rest is what turn two decoded. mistral-v1 writes a
    // space before a reply, which SentencePiece then reads with the reply's first word as another
    // token: there the cache keeps only the prefix it shares with the whole conversation.
    Loaded m(model);
    const std::vector<kvg_token> whole = tokens(m.model, format(c.tmpl, {kSys, kUser1, t.first_text, kUser2}));
    std::vector<kvg_token> held = t.prompt;
    held.push_back(t.first);
    long shared = 0;
    while (shared < (long) held.size() && shared < (long) whole.size() && held[shared] == whole[shared]) ++shared;
    CHECK(shared == (std::string(c.tmpl) == "mistral-v1" ? r.held1 - 1 : r.held1));
    const size_t turn2 = run.err.find("[turn 2: ");
    REQUIRE(turn2 != std::string::npos);
    r.decoded2 = number_after(run.err, "[turn 2: ");
    CHECK(number_after(run.err, "tokens decoded, ", turn2) == shared);
    CHECK(r.decoded2 == (long) whole.size() - shared);

    // Turn two's reply is a fresh context's, and ends as it does (end of turn or -n).
    bool eog = false;
    CHECK(r.reply2 == fresh_reply(model, whole, &eog));
    CHECK(!r.reply2.empty());
    CHECK(run.err.find(eog ? "[reply: end of turn;" : "[reply: -n tokens;", turn2) != std::string::npos);
    MESSAGE(std::string(c.tmpl) << ": turn 1 " << t.prompt.size() << " tokens, turn 2 " << r.decoded2 << " new of "
                                << whole.size() << ", reply 2 of " << r.reply2.size() << " bytes, "
                                << std::string(eog ? "ended at the end of turn" : "cut by -n"));
    r.model = model;
    return r;
}

// --prompt-cache: turn one in a run, turn two in another that resumes it, as in one run (r).
void check_resume(const TwoTurns & r, const char * tmpl) {
    const std::string cache = temp_path("chatfam", "conversation.kvgs");
    const family_twin::TempFile cache_file{cache}, chat_file{cache + ".chat"};
    std::vector<std::string> args = cnv_args(r.model, tmpl);
    args.insert(args.end(), {"--prompt-cache", cache});
    const Run one = generate(args, kUser1 + "\n");
    INFO(one.err);
    REQUIRE(one.code == 0);
    CHECK(number_after(one.err, "[reply: end of turn; the cache holds ") == r.held1);
    const std::string chat = read_file(cache + ".chat");
    REQUIRE(chat.find(kUser1) != std::string::npos);
    const Run two = generate(args, kUser2 + "\n");
    INFO(two.err);
    REQUIRE(two.code == 0);
    CHECK(number_after(two.err, ": 3 messages, ") == r.held1); // [resumed from F: 3 messages, N tokens ...]
    const size_t turn = two.err.find("[turn 1: ");
    REQUIRE(turn != std::string::npos);
    CHECK(number_after(two.err, "[turn 1: ") == r.decoded2);
    CHECK(number_after(two.err, "tokens decoded, ", turn) == r.held1);
    CHECK(two.out == r.reply2 + "\n");

    // A conversation file that is not the state's (another question), or is not one: a first run.
    std::string other = chat;
    other.replace(other.find("France"), 6, "Greece");
    write_file(cache + ".chat", other);
    const Run mismatch = generate(args, kUser1 + "\n");
    CHECK(mismatch.err.find("its tokens are not those of its conversation; starting afresh") != std::string::npos);
    CHECK(mismatch.out == one.out);
    write_file(cache + ".chat", "KVGCHAT1\nuser 999\nHi\n");
    const Run bad = generate(args, kUser1 + "\n");
    CHECK(bad.code == 0);
    CHECK(bad.err.find(".chat' is missing or not a conversation; starting afresh") != std::string::npos);
    CHECK(bad.out == one.out);
    const Run help = generate({"--help"}, "");
    CHECK(help.out.find("conversation (the cache after each turn, its messages in F.chat)") != std::string::npos);
}

const ChatCase kLlama3 = {"llama3", "llama3", "", "<|eot_id|>"};

} // namespace

TEST_CASE("-cnv, llama3 template, Llama 3 vocabulary: replies end at <|eot_id|>; --prompt-cache resumes") {
    family_twin::TempFile model{temp_path("chatfam", "llama3.gguf")};
    const TwoTurns r = check_template(kLlama3, model.path);
    if (!r.model.empty()) check_resume(r, kLlama3.tmpl);
}

TEST_CASE("-cnv, chatml template, Qwen2 vocabulary: replies end at <|im_end|>") {
    family_twin::TempFile model{temp_path("chatfam", "chatml.gguf")};
    check_template({"chatml", "qwen2", "", "<|im_end|>"}, model.path);
}

TEST_CASE("-cnv, phi3 template, Phi-3 vocabulary: replies end at <|end|>") {
    family_twin::TempFile model{temp_path("chatfam", "phi3.gguf")};
    check_template({"phi3", "phi3", "", "<|end|>"}, model.path);
}

TEST_CASE("-cnv, gemma and mistral-v1 templates, Llama 2 vocabulary: replies end at </s>") {
    for (const std::string tmpl : {"gemma", "mistral-v1"}) {
        CAPTURE(tmpl);
        family_twin::TempFile model{temp_path("chatfam", tmpl + ".gguf")};
        check_template({tmpl.c_str(), "llama3-norf", "ggml-vocab-llama-spm.gguf", "</s>"}, model.path);
    }
}
