// kvg_chat_apply_template against llama.cpp's llama_chat_apply_template: the conversation and
// templates of tests/fixtures/chat/templates.txt (each template by name and by the Jinja text of
// real model files) give byte for byte the text llama.cpp gave (tests/fixtures/chat/llama-cpp.txt,
// written by scripts/llama-chat-ref.cpp), with and without add_assistant. Also: the return
// convention (a buffer too small, or NULL, gets the length needed), NULL tmpl reading the
// model file's tokenizer.chat_template, and the refusal of templates it does not know.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "gguf.h"
#include "kvgraph.h"
#include "test-common.h"

#include <cstdio>
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

// A copy of a ../shared vocabulary with tokenizer.chat_template set (gguf's own writer).
std::string vocab_with_template(const std::string & tmpl, const std::string & tag) {
    gguf_init_params gp = {true, nullptr};
    gguf_context * g = gguf_init_from_file((shared_dir() + "/vocab/ggml-vocab-llama-bpe.gguf").c_str(), gp);
    REQUIRE(g != nullptr);
    if (!tmpl.empty()) gguf_set_val_str(g, "tokenizer.chat_template", tmpl.c_str());
    const std::string out = temp_path("chat", tag + ".gguf");
    REQUIRE(gguf_write_to_file(g, out.c_str(), false));
    gguf_free(g);
    return out;
}

kvg_model * load_vocab(const std::string & path) {
    kvg_model_params p = kvg_model_default_params();
    p.vocab_only = true;
    char err[512] = "";
    kvg_model * m = kvg_model_load(path.c_str(), nullptr, p, err, sizeof err);
    INFO(err);
    REQUIRE(m != nullptr);
    return m;
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
