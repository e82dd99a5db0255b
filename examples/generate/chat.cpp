// kvg-generate -cnv (chat.h). Each turn formats the whole conversation with the chat template
// (kvg_chat_apply_template) and decodes only what follows the text the cache holds: the
// template's close of the last reply and the new user turn, tokenized as they are in the whole
// text (so where a reply's tokens are those its text tokenizes to, the cache holds exactly the
// tokens of a fresh run fed the whole conversation). The tokens generated for a reply stay in
// the cache; only if the template changes a reply's text (one that trims it) is the cache cut
// back to the prefix it shares with the conversation's tokens. With --prompt-cache the cache and
// the messages are saved after each turn, and a later run resumes from them (save_session).
#include "chat.h"

#include "text-io.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

struct Conversation {
    const char * tmpl; // NULL: the model's
    std::vector<std::string> roles, contents;

    void add(const char * role, const std::string & content) {
        roles.push_back(role);
        contents.push_back(content);
    }
};

// The conversation (its first n_msgs messages, -1: all) as text, ending with the opening of the
// assistant's turn; false with a message.
bool format(const kvg_model * model, const Conversation & c, std::string * out, size_t n_msgs = (size_t) -1) {
    std::vector<kvg_chat_message> msgs;
    for (size_t i = 0; i < c.roles.size() && i < n_msgs; ++i)
        msgs.push_back({c.roles[i].c_str(), c.contents[i].c_str()});
    char err[1024];
    const int32_t n =
        kvg_chat_apply_template(model, c.tmpl, msgs.data(), msgs.size(), true, nullptr, 0, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "error: %s\n", err);
        return false;
    }
    out->assign((size_t) n + 1, '\0');
    kvg_chat_apply_template(model, c.tmpl, msgs.data(), msgs.size(), true, &(*out)[0], n + 1, err, sizeof err);
    out->resize((size_t) n);
    return true;
}

// The conversation's tokens, control-token text ("<|im_start|>", "</s>") read as those tokens,
// as llama.cpp's -cnv reads it: the model was trained on the tokens, not on their spelling.
std::vector<kvg_token> tokenize(kvg_model * model, const std::string & text, bool add_bos) {
    std::vector<kvg_token> out((size_t) -kvg_tokenize_special(model, text.c_str(), add_bos, true, nullptr, 0));
    kvg_tokenize_special(model, text.c_str(), add_bos, true, out.data(), (int32_t) out.size());
    return out;
}

// Bytes of text at `at` read as the control token tok (its piece is empty), 0 if none.
size_t special_len(kvg_model * model, const std::string & text, size_t at, kvg_token tok) {
    for (size_t len = 1; at + len <= text.size() && len <= 256; ++len) {
        if (tokenize(model, text.substr(at, len), false) == std::vector<kvg_token>{tok}) return len;
    }
    return 0;
}

// Where each token of `tokens` (text's, after a BOS the tokenizer adds) starts in text (one
// more entry: the end). Text after a control token is tokenized as a text of its own, so its
// first piece is taken as a text's first (SentencePiece: without the dummy-prefix space).
std::vector<size_t> text_offsets(kvg_model * model, const std::string & text, const std::vector<kvg_token> & tokens) {
    const size_t n_bos = tokens.size() - tokenize(model, text, false).size();
    std::vector<size_t> at(n_bos + 1, 0);
    bool starts = true;
    for (size_t i = n_bos; i < tokens.size(); ++i) {
        const std::string p = piece(model, starts ? -1 : tokens[i - 1], tokens[i]);
        at.push_back(at.back() + (p.empty() ? special_len(model, text, at.back(), tokens[i]) : p.size()));
        starts = p.empty();
    }
    return at;
}

// The cache (held, whose text is held_text) and the conversation to continue (want: BOS + its
// tokenized text): the index of want's first token to decode after what the cache holds, or -1
// when the cache holds something else (a reply whose text the template changes, a token across
// the end of the reply).
long continuation(kvg_model * model, const std::string & held_text, const std::string & text,
                  const std::vector<kvg_token> & want) {
    if (text.compare(0, held_text.size(), held_text) != 0) return -1;
    const std::vector<size_t> at = text_offsets(model, text, want);
    for (size_t j = 1; j < want.size(); ++j) {
        if (at[j] == held_text.size()) return (long) j;
    }
    return -1;
}

// Makes the cache hold the conversation `text`: only its tokens past what the cache holds are
// decoded, so the tokens generated for the replies stay as they are. If the cache holds
// something else, it keeps the longest prefix it shares with want (BOS + text's tokens) and
// decodes the rest. Returns the last token's logits (nullptr with a message); *n_new: the tokens
// decoded.
const float * sync_cache(kvg_model * model, kvg_context * ctx, kvg_sampler * smpl, const std::string & text,
                         const std::vector<kvg_token> & want, std::vector<kvg_token> & held, std::string & held_text,
                         int * n_new) {
    std::vector<kvg_token> add;
    const long j = held.empty() ? -1 : continuation(model, held_text, text, want);
    size_t keep = 0;
    if (j > 0) {
        add.assign(want.begin() + j, want.end());
        keep = held.size();
    } else {
        while (keep < held.size() && keep + 1 < want.size() && held[keep] == want[keep]) ++keep;
        add.assign(want.begin() + (long) keep, want.end());
    }
    if (keep + add.size() > (size_t) kvg_n_ctx(ctx)) {
        fprintf(stderr, "error: the conversation needs %zu tokens but the context holds only %d (use -c)\n",
                keep + add.size(), kvg_n_ctx(ctx));
        return nullptr;
    }
    char err[1024];
    if (keep < held.size() && !kvg_seq_rm(ctx, 0, (int32_t) keep, -1, err, sizeof err)) {
        keep = 0; // e.g. a cut inside a finished q8_0 group: start again
        add = want;
        kvg_seq_rm(ctx, 0, 0, -1, err, sizeof err);
    }
    *n_new = (int) add.size();
    const float * logits = kvg_decode(ctx, add.data(), *n_new, (int32_t) keep, err, sizeof err);
    if (!logits) {
        fprintf(stderr, "error: %s\n", err);
        return nullptr;
    }
    for (kvg_token t : add) kvg_sampler_accept(smpl, t); // the penalties see the turn
    held.resize(keep);
    held.insert(held.end(), add.begin(), add.end());
    held_text = text;
    return logits;
}

// Streams the reply from logits on: sampled tokens are decoded into the cache (held) until an
// end-of-generation token, -n tokens or a full context. Returns its text; *why: how it ended.
std::string reply(kvg_model * model, kvg_context * ctx, kvg_sampler * smpl, const options & o, const float * logits,
                  std::vector<kvg_token> & held, std::string & held_text, const char ** why) {
    std::string text;
    kvg_token prev = held.back();
    char err[1024];
    for (int n = 0;; ++n) {
        const kvg_token tok = kvg_sampler_sample(smpl, logits, kvg_model_n_vocab(model));
        if (kvg_token_is_eog(model, tok)) {
            *why = "end of turn";
            break;
        }
        const std::string p = piece(model, prev, tok);
        fputs(p.c_str(), stdout);
        fflush(stdout);
        text += p;
        prev = tok;
        if ((int) held.size() >= kvg_n_ctx(ctx)) {
            *why = "context full";
            break;
        }
        // the last token too: the cache then holds the whole reply, the next turn only its own tokens
        logits = kvg_decode(ctx, &tok, 1, (int32_t) held.size(), err, sizeof err);
        if (!logits) {
            fprintf(stderr, "\nerror: %s\n", err);
            *why = "error";
            break;
        }
        held.push_back(tok);
        held_text += p;
        if (n + 1 == o.n_gen) {
            *why = "-n tokens";
            break;
        }
    }
    return text;
}

// --prompt-cache F: after each turn, the cache (its state and tokens) goes to F and the messages
// to F.chat ("KVGCHAT1", then per message a line "ROLE BYTES", its bytes and a line feed), each
// written beside and renamed over the old one. A later run with F resumes the conversation.
bool save_session(const kvg_context * ctx, const std::string & path, const Conversation & c,
                  const std::vector<kvg_token> & held) {
    char err[1024];
    if (!kvg_state_seq_save_file(ctx, 0, path.c_str(), held.data(), (int32_t) held.size(), err, sizeof err)) {
        fprintf(stderr, "prompt cache: %s\n", err);
        return false;
    }
    const std::string chat = path + ".chat", tmp = chat + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary);
        f << "KVGCHAT1\n";
        for (size_t i = 0; i < c.roles.size(); ++i)
            f << c.roles[i] << ' ' << c.contents[i].size() << '\n' << c.contents[i] << '\n';
        if (!f.flush()) {
            fprintf(stderr, "prompt cache: cannot write '%s'\n", tmp.c_str());
            return false;
        }
    }
    if (std::rename(tmp.c_str(), chat.c_str()) != 0) {
        fprintf(stderr, "prompt cache: cannot rename '%s' to '%s'\n", tmp.c_str(), chat.c_str());
        return false;
    }
    return true;
}

// The messages of a F.chat; false if it is not one (truncated, a bad header or length).
bool read_messages(const std::string & path, Conversation * c) {
    std::ifstream f(path, std::ios::binary);
    const std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (s.compare(0, 9, "KVGCHAT1\n") != 0) return false;
    for (size_t at = 9; at < s.size();) {
        const size_t sp = s.find(' ', at), eol = s.find('\n', at);
        if (sp == std::string::npos || eol == std::string::npos || sp > eol) return false;
        const std::string role = s.substr(at, sp - at), len = s.substr(sp + 1, eol - sp - 1);
        if (role != "system" && role != "user" && role != "assistant") return false;
        if (len.empty() || len.size() > 12 || len.find_first_not_of("0123456789") != std::string::npos) return false;
        const size_t n = std::stoul(len);
        if (n > s.size() - eol - 1 || eol + 1 + n >= s.size() || s[eol + 1 + n] != '\n') return false;
        c->add(role.c_str(), s.substr(eol + 1, n));
        at = eol + 2 + n;
    }
    return !c->roles.empty() && c->roles.back() == "assistant";
}

// Resumes the conversation saved in path and path.chat: the cache, its tokens and text, and the
// messages. false (nothing changed) when there is none (a first run) or it cannot be used: then
// the message says why, and the conversation starts afresh.
bool load_session(kvg_model * model, kvg_context * ctx, kvg_sampler * smpl, const std::string & path, Conversation * c,
                  std::vector<kvg_token> & held, std::string & held_text) {
    Conversation saved{c->tmpl, {}, {}};
    std::ifstream probe(path);
    if (!probe) return false; // a first run
    if (!read_messages(path + ".chat", &saved)) {
        fprintf(stderr, "prompt cache: '%s.chat' is missing or not a conversation; starting afresh\n", path.c_str());
        return false;
    }
    std::string text;
    if (!format(model, saved, &text, saved.roles.size() - 1)) return false;
    std::vector<kvg_token> tokens((size_t) kvg_n_ctx(ctx));
    char err[1024];
    const int32_t n =
        kvg_state_seq_load_file(ctx, 0, path.c_str(), tokens.data(), (int32_t) tokens.size(), err, sizeof err);
    const std::vector<kvg_token> prompt = tokenize(model, text, true);
    tokens.resize(n < 0 ? 0 : (size_t) n);
    // the state must hold the conversation up to the last reply, then that reply's tokens
    if (n < 0 || tokens.size() <= prompt.size() || !std::equal(prompt.begin(), prompt.end(), tokens.begin())) {
        fprintf(stderr, "prompt cache: %s; starting afresh\n",
                n < 0 ? err : "its tokens are not those of its conversation");
        kvg_seq_rm(ctx, 0, 0, -1, err, sizeof err);
        return false;
    }
    *c = saved;
    held = tokens;
    held_text = text + saved.contents.back();
    for (kvg_token t : held) kvg_sampler_accept(smpl, t);
    return true;
}

} // namespace

int run_conversation(kvg_model * model, kvg_context * ctx, kvg_sampler * smpl, const options & o) {
    if (!kvg_model_has_vocab(model)) {
        fprintf(stderr, "error: -cnv needs a tokenizer (pass -z tokenizer.bin)\n");
        return 1;
    }
    Conversation conv{o.chat_template.empty() ? nullptr : o.chat_template.c_str(), {}, {}};
    std::string text;
    if (!format(model, conv, &text)) return 1; // an unknown template fails before any input is read
    const bool tty = isatty(1) != 0; // decorations only for a person at a terminal
    std::vector<kvg_token> held, want;
    std::string held_text; // the text of held
    const bool resumed =
        !o.prompt_cache.empty() && load_session(model, ctx, smpl, o.prompt_cache, &conv, held, held_text);
    if (resumed) {
        if (o.verbose) {
            fprintf(stderr, "[resumed from %s: %zu messages, %zu tokens in the cache]\n", o.prompt_cache.c_str(),
                    conv.roles.size(), held.size());
        }
        if (!o.system_prompt.empty() && (conv.roles[0] != "system" || conv.contents[0] != o.system_prompt)) {
            fprintf(stderr, "note: -sys ignored: the resumed conversation keeps its own system message\n");
        }
    } else if (!o.system_prompt.empty()) {
        conv.add("system", o.system_prompt);
    }
    int turn = 0;
    for (std::string line;;) {
        if (tty) {
            printf("\n> ");
            fflush(stdout);
        }
        if (!std::getline(std::cin, line)) break;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        conv.add("user", line);
        int n_new = 0;
        const float * logits = nullptr;
        if (!format(model, conv, &text)) return 1;
        want = tokenize(model, text, true);
        if (!(logits = sync_cache(model, ctx, smpl, text, want, held, held_text, &n_new))) return 1;
        if (o.verbose) {
            fprintf(stderr, "[turn %d: %d tokens decoded, %zu reused from the cache]\n", ++turn, n_new,
                    held.size() - n_new);
        }
        const char * why = "";
        conv.add("assistant", reply(model, ctx, smpl, o, logits, held, held_text, &why));
        printf("\n");
        fflush(stdout);
        if (o.verbose) fprintf(stderr, "[reply: %s; the cache holds %zu tokens]\n", why, held.size());
        if (std::string(why) == "error") return 1;
        if (!o.prompt_cache.empty()) save_session(ctx, o.prompt_cache, conv, held);
    }
    if (tty) printf("\n");
    return 0;
}
