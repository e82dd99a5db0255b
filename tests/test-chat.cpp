// kvg_chat_apply_template against llama.cpp's llama_chat_apply_template: the conversation and
// templates of tests/fixtures/chat/templates.txt (each template by name and by the Jinja text of
// real model files) give byte for byte the text llama.cpp gave (tests/fixtures/chat/llama-cpp.txt,
// written by scripts/llama-chat-ref.cpp), with and without add_assistant. Also: the return
// convention (a buffer too small, or NULL, gets the length needed), NULL tmpl reading the
// model file's tokenizer.chat_template, and the refusal of templates it does not know.
// kvg-generate -cnv (when built) through a pipe on the shipped stories260K model: the replies,
// the cache kept between turns, and turn two equal to a fresh run fed the whole conversation.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "generate-run-common.h"
#include "gguf.h"
#include "kvgraph.h"
#include "test-common.h"
#include "vocab-test-common.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Record {
    std::string kind, name, arg, body;
};

// The fixtures' records: a line "==== KIND NAME [ARG]" and the bytes up to the next line that
// starts with "====", less the one newline before it.
std::vector<Record> read_records(const std::string & name) {
    const std::string s = read_file(std::string(KVG_SOURCE_DIR) + "/tests/fixtures/chat/" + name);
    REQUIRE(!s.empty());
    std::vector<Record> out;
    size_t at = s.compare(0, 5, "==== ") == 0 ? 0 : s.find("\n==== ");
    if (at != std::string::npos && at > 0) ++at;
    while (at != std::string::npos) {
        const size_t eol = s.find('\n', at);
        REQUIRE(eol != std::string::npos);
        std::istringstream head(s.substr(at + 5, eol - at - 5));
        Record r;
        head >> r.kind >> r.name >> r.arg;
        const size_t next = s.find("\n==== ", eol);
        const size_t end = next == std::string::npos ? s.size() - 1 : next;
        r.body = s.substr(eol + 1, end - eol - 1);
        out.push_back(r);
        at = next == std::string::npos ? next : next + 1;
    }
    return out;
}

struct Fixture {
    std::vector<std::string> roles, contents;
    std::vector<std::pair<std::string, std::string>> templates; // case, text
    std::map<std::string, std::string> want;                    // "case add" -> llama.cpp's text

    std::vector<kvg_chat_message> messages() const {
        std::vector<kvg_chat_message> m;
        for (size_t i = 0; i < roles.size(); ++i) m.push_back({roles[i].c_str(), contents[i].c_str()});
        return m;
    }
};

const Fixture & fixture() {
    static Fixture f = [] {
        Fixture x;
        for (const Record & r : read_records("templates.txt")) {
            if (r.kind == "message") {
                x.roles.push_back(r.name);
                x.contents.push_back(r.body);
            } else if (r.kind == "template") {
                x.templates.emplace_back(r.name, r.body);
            }
        }
        for (const Record & r : read_records("llama-cpp.txt")) {
            if (r.kind == "output") x.want[r.name + " " + r.arg] = r.body;
        }
        return x;
    }();
    return f;
}

// kvg_chat_apply_template's text, sized by a first call with no buffer.
std::string apply(const kvg_model * model, const char * tmpl, const std::vector<kvg_chat_message> & msgs, bool add) {
    char err[512] = "";
    const int32_t n = kvg_chat_apply_template(model, tmpl, msgs.data(), msgs.size(), add, nullptr, 0, err, sizeof err);
    INFO(err);
    REQUIRE(n >= 0);
    std::string buf(n + 1, '\x7f');
    REQUIRE(kvg_chat_apply_template(model, tmpl, msgs.data(), msgs.size(), add, &buf[0], n + 1, err, sizeof err) == n);
    CHECK(buf[n] == '\0');
    buf.resize(n);
    return buf;
}

// A copy of a ../shared vocabulary with tokenizer.chat_template set ("": none).
std::string vocab_with_template(const std::string & tmpl, const std::string & tag) {
    return edited_gguf(shared_dir() + "/vocab/ggml-vocab-llama-bpe.gguf", "chat-" + tag, [&](gguf_context * g) {
        if (!tmpl.empty()) gguf_set_val_str(g, "tokenizer.chat_template", tmpl.c_str());
    });
}

} // namespace

TEST_CASE("every template, by name and by Jinja text, equals llama.cpp's output byte for byte") {
    const Fixture & f = fixture();
    REQUIRE(f.roles.size() == 4);
    REQUIRE(f.templates.size() >= 30);
    int checked = 0;
    for (const auto & t : f.templates) {
        for (int add = 0; add < 2; ++add) {
            CAPTURE(t.first);
            CAPTURE(add);
            const auto it = f.want.find(t.first + " " + std::to_string(add));
            REQUIRE(it != f.want.end());
            CHECK(apply(nullptr, t.second.c_str(), f.messages(), add) == it->second);
            ++checked;
        }
    }
    CHECK(checked == 2 * (int) f.templates.size());
}

TEST_CASE("return convention: the length needed, whatever the buffer") {
    const Fixture & f = fixture();
    const std::vector<kvg_chat_message> msgs = f.messages();
    const std::string full = apply(nullptr, "llama3", msgs, true);
    REQUIRE(full.size() > 64);
    const int32_t n = (int32_t) full.size();
    char err[256];
    CHECK(kvg_chat_apply_template(nullptr, "llama3", msgs.data(), msgs.size(), true, nullptr, 100, err, sizeof err) ==
          n);
    for (int32_t size : {1, 16, n - 1, n}) {
        CAPTURE(size);
        std::string buf(n + 8, '\x7f');
        CHECK(kvg_chat_apply_template(nullptr, "llama3", msgs.data(), msgs.size(), true, &buf[0], size, err,
                                      sizeof err) == n);
        CHECK(buf.compare(0, size, full, 0, size) == 0); // the first size bytes, no NUL: as llama.cpp's strncpy
        CHECK(buf[size] == '\x7f');                      // nothing past size
    }
    CHECK(kvg_last_status() == KVG_STATUS_OK);
    // No messages: only the assistant's opening.
    CHECK(apply(nullptr, "chatml", {}, true) == "<|im_start|>assistant\n");
    CHECK(apply(nullptr, "chatml", {}, false).empty());
}

TEST_CASE("NULL tmpl: the model file's tokenizer.chat_template, chatml without one") {
    const Fixture & f = fixture();
    const std::vector<kvg_chat_message> msgs = f.messages();
    for (const char * name : {"jinja-llama-3.2-3b", "jinja-gemma-2-2b-it", "jinja-phi-3.5-mini", "jinja-qwen2.5"}) {
        CAPTURE(name);
        std::string text;
        for (const auto & t : f.templates) {
            if (t.first == name) text = t.second;
        }
        REQUIRE(!text.empty());
        const std::string path = vocab_with_template(text, name);
        kvg_model * m = load_vocab(path);
        for (int add = 0; add < 2; ++add)
            CHECK(apply(m, nullptr, msgs, add) == f.want.at(name + std::string(" ") + std::to_string(add)));
        // A template given by the caller wins over the file's.
        CHECK(apply(m, "chatml", msgs, true) == f.want.at("chatml 1"));
        kvg_model_free(m);
        std::remove(path.c_str());
    }
    const std::string path = vocab_with_template("", "none");
    kvg_model * m = load_vocab(path);
    CHECK(apply(m, nullptr, msgs, true) == f.want.at("chatml 1"));
    kvg_model_free(m);
    std::remove(path.c_str());
}

TEST_CASE("an unknown template is refused, naming it; bad arguments") {
    const Fixture & f = fixture();
    const std::vector<kvg_chat_message> msgs = f.messages();
    char err[512] = "";
    char buf[64] = "untouched";
    // Unknown text; a text llama.cpp formats as another family (falcon3); a name of one (vicuna).
    const char * zephyr = "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + "
                          "'<|endoftext|>\\n' }}{% endfor %}<|user|><|assistant|>";
    for (const char * t :
         {"INVALID TEMPLATE", "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", zephyr, "vicuna"}) {
        CAPTURE(t);
        CHECK(kvg_chat_apply_template(nullptr, t, msgs.data(), msgs.size(), true, buf, sizeof buf, err, sizeof err) ==
              -1);
        CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
        CHECK(std::string(err).find(std::string(t).substr(0, 12)) != std::string::npos);
        CHECK(std::string(buf) == "untouched");
    }
    // The quoted start is cut between UTF-8 characters.
    const std::string long_text = std::string(39, 'x') + "\xe6\x97\xa5\xe6\x9c\xac";
    CHECK(kvg_chat_apply_template(nullptr, long_text.c_str(), msgs.data(), msgs.size(), true, nullptr, 0, err,
                                  sizeof err) == -1);
    CHECK(std::string(err).find(std::string(39, 'x') + "...'") != std::string::npos);
    // A model whose file holds an unknown template: refused when asked for the file's.
    const std::string path = vocab_with_template("{{ messages }}", "unknown");
    kvg_model * m = load_vocab(path);
    CHECK(kvg_chat_apply_template(m, nullptr, msgs.data(), msgs.size(), true, nullptr, 0, err, sizeof err) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_UNSUPPORTED);
    CHECK(std::string(err).find("{{ messages }}") != std::string::npos);
    kvg_model_free(m);
    std::remove(path.c_str());

    CHECK(kvg_chat_apply_template(nullptr, nullptr, msgs.data(), msgs.size(), true, nullptr, 0, err, sizeof err) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    CHECK(kvg_chat_apply_template(nullptr, "chatml", nullptr, 2, true, nullptr, 0, err, sizeof err) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
    const kvg_chat_message no_content[] = {{"user", nullptr}};
    CHECK(kvg_chat_apply_template(nullptr, "chatml", no_content, 1, true, nullptr, 0, nullptr, 0) == -1);
    CHECK(kvg_last_status() == KVG_STATUS_BAD_INPUT);
}

// ---- kvg-generate -cnv, through a pipe ------------------------------------------------------------

using generate_run::generate;
using generate_run::generate_path;
using generate_run::number_after;
using generate_run::Run;

TEST_CASE("kvg-generate -cnv: turns from a pipe, the cache kept, turn two as a fresh run gives it") {
    if (generate_path().empty()) {
        MESSAGE("kvg-generate not built: skipped (set KVG_GENERATE to its path)");
        return;
    }
    const std::string model = model_path("stories260K.bin"), tok = model_path("tok512.bin");
    const std::string sys = "You tell short stories.", user1 = "Tom had a red ball.", user2 = "Where did the ball go?";
    // Replies of 48 tokens: this model's text (through another model's tokenizer) is noise, whose
    // tokens are those its text tokenizes to for a while; a reply holding a pair of tokens its text
    // tokenizes otherwise could be matched by no run fed text (here from about 150 tokens on).
    const std::vector<std::string> common = {"-m", model, "-z", tok, "--temp", "0", "-t", "1", "-c", "512", "-n", "48"};
    std::vector<std::string> cnv = common;
    cnv.insert(cnv.end(), {"-cnv", "--chat-template", "chatml", "-sys", sys, "--verbose"});
    const Run one = generate(cnv, user1 + "\n"), two = generate(cnv, user1 + "\n\n" + user2 + "\n");
    INFO(one.err);
    INFO(two.err);
    REQUIRE(one.code == 0);
    REQUIRE(two.code == 0);
    // No decorations in a pipe: the replies, one line feed after each; turn one the same either way.
    REQUIRE(one.out.size() > 1);
    CHECK(one.out.back() == '\n');
    REQUIRE(two.out.compare(0, one.out.size(), one.out) == 0);
    CHECK(two.out.find("> ") == std::string::npos);
    const std::string reply1 = one.out.substr(0, one.out.size() - 1), reply2 = two.out.substr(one.out.size());
    CHECK(reply2.size() > 1);
    // Turn two decodes only its new tokens: all that the cache held after turn one is reused.
    const size_t turn2 = two.err.find("[turn 2: ");
    REQUIRE(turn2 != std::string::npos);
    const long held1 = number_after(two.err, "the cache holds "), decoded2 = number_after(two.err, "[turn 2: "),
               reused2 = number_after(two.err, "tokens decoded, ", turn2);
    CHECK(held1 > 0);
    CHECK(reused2 == held1);
    CHECK(decoded2 > 0);
    CHECK(decoded2 < 70); // "<|im_end|>\n<|im_start|>user\n" ... in tok512's pieces

    // A fresh run fed the whole conversation gives turn two's reply, and decodes as many tokens.
    const std::vector<kvg_chat_message> msgs = {
        {"system", sys.c_str()}, {"user", user1.c_str()}, {"assistant", reply1.c_str()}, {"user", user2.c_str()}};
    char text[4096];
    const int32_t n =
        kvg_chat_apply_template(nullptr, "chatml", msgs.data(), msgs.size(), true, text, sizeof text, nullptr, 0);
    REQUIRE(n > 0);
    REQUIRE(n < (int32_t) sizeof text);
    const std::string prompt = temp_path("chat", "prompt.txt");
    write_file(prompt, text);
    std::vector<std::string> fresh_args = common;
    fresh_args.insert(fresh_args.end(), {"-f", prompt, "--no-display-prompt"});
    const Run fresh = generate(fresh_args, "");
    std::remove(prompt.c_str());
    INFO(fresh.err);
    REQUIRE(fresh.code == 0);
    CHECK(fresh.out == reply2);
    CHECK(number_after(fresh.err, "prompt: ") == reused2 + decoded2);
}

TEST_CASE("kvg-generate -cnv: the end of a reply; an unknown template fails before reading input; --help") {
    if (generate_path().empty()) return;
    const std::string model = model_path("stories260K.bin"), tok = model_path("tok512.bin");
    const Run bad = generate({"-m", model, "-z", tok, "-cnv", "--chat-template", "{{ nope }}"}, "Hi\n");
    CHECK(bad.code == 1);
    CHECK(bad.err.find("chat template '{{ nope }}' is not one kvgraph formats") != std::string::npos);
    CHECK(bad.out.empty());
    const Run with_p = generate({"-m", model, "-z", tok, "-cnv", "-p", "Hi"}, "");
    CHECK(with_p.code == 1);
    CHECK(with_p.err.find("-cnv reads the user's turns from stdin") != std::string::npos);
    const Run help = generate({"--help"}, "");
    CHECK(help.code == 0);
    for (const char * opt : {"-cnv, --conversation", "--chat-template", "-sys, --system-prompt", "--verbose"}) {
        CAPTURE(opt);
        CHECK(help.out.find(opt) != std::string::npos);
    }
    // A reply ends at the end-of-generation token (aidreams260K, its own tokenizer, says EOS here).
    const Run eog = generate({"-m", model_path("aidreams260K.bin"), "-z", tok, "-cnv", "--chat-template", "llama2",
                              "--temp", "0", "-t", "1", "-n", "100", "--verbose"},
                             "Hi\n");
    INFO(eog.err);
    CHECK(eog.code == 0);
    CHECK(eog.err.find("[reply: end of turn;") != std::string::npos);
    // End of input at once: no turn, no reply, success.
    const Run empty = generate({"-m", model, "-z", tok, "-cnv", "--chat-template", "chatml"}, "");
    CHECK(empty.code == 0);
    CHECK(empty.out.empty());
}
