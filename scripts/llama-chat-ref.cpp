// llama.cpp's reference for tests/test-chat.cpp: formats the conversation of
// tests/fixtures/chat/templates.txt with each of its templates through llama.cpp's
// llama_chat_apply_template, with and without add_ass, and writes the outputs.
// Not part of the build: it links llama.cpp, which lives outside the tree. Build it against a
// llama.cpp build directory:
//   L=/work/peers/llama.cpp
//   g++ -O2 -std=c++17 scripts/llama-chat-ref.cpp -I$L/include -I$L/ggml/include -L$L/build/bin \
//       -lllama -lggml -lggml-base -Wl,-rpath,$L/build/bin -o /work/peers/llama-chat-ref
// Usage: llama-chat-ref tests/fixtures/chat/templates.txt tests/fixtures/chat/llama-cpp.txt NOTE
//   NOTE (e.g. "llama.cpp <commit>") is stored in the output's header for people.
// Both files use one record format: a line "==== KIND NAME" and the bytes up to the next line
// starting with "====", less the one newline before it.
#include "llama.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Record {
    std::string kind, name, body;
};

std::vector<Record> read_records(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string s = ss.str();
    std::vector<Record> out;
    size_t at = s.compare(0, 5, "==== ") == 0 ? 0 : s.find("\n==== "); // records start lines
    if (at != std::string::npos && at > 0) ++at;
    while (at != std::string::npos) {
        const size_t eol = s.find('\n', at);
        std::istringstream head(s.substr(at + 5, eol - at - 5));
        Record r;
        head >> r.kind >> r.name;
        size_t next = s.find("\n==== ", eol);
        const size_t end = next == std::string::npos ? s.size() - 1 : next; // drop the last newline
        r.body = s.substr(eol + 1, end - eol - 1);
        out.push_back(r);
        at = next == std::string::npos ? next : next + 1;
    }
    return out;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s TEMPLATES.txt OUT.txt NOTE\n", argv[0]);
        return 1;
    }
    std::vector<llama_chat_message> conv;
    const std::vector<Record> recs = read_records(argv[1]);
    for (const Record & r : recs) {
        if (r.kind == "message") conv.push_back({r.name.c_str(), r.body.c_str()});
    }
    std::string out = "# llama.cpp's llama_chat_apply_template of tests/fixtures/chat/templates.txt, written by\n"
                      "# scripts/llama-chat-ref.cpp (" +
                      std::string(argv[3]) +
                      "). A record \"==== output CASE add_assistant\" (0 or 1) holds the text\n"
                      "# (the records of templates.txt, with the same format).\n";
    int n = 0;
    for (const Record & r : recs) {
        if (r.kind != "template") continue;
        for (int add = 0; add < 2; ++add) {
            std::vector<char> buf(1);
            int32_t len = llama_chat_apply_template(r.body.c_str(), conv.data(), conv.size(), add, buf.data(), 1);
            if (len < 0) {
                fprintf(stderr, "llama.cpp does not know template %s\n", r.name.c_str());
                return 1;
            }
            buf.resize(len + 1);
            len = llama_chat_apply_template(r.body.c_str(), conv.data(), conv.size(), add, buf.data(), len + 1);
            out += "==== output " + r.name + " " + std::to_string(add) + "\n" + std::string(buf.data(), len) + "\n";
            ++n;
        }
    }
    std::ofstream f(argv[2], std::ios::binary);
    f << out;
    if (!f) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 1;
    }
    printf("%d outputs, %zu messages\n", n, conv.size());
    return 0;
}
