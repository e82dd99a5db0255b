// kvg-perplexity against llama.cpp's llama-perplexity: each family's tiny model (written again by
// the twin of scripts/tiny_family.py, tests/family-common.h), the same text
// (tests/fixtures/perplexity/text.txt) and the same 64-token chunks give the running estimate
// after every chunk and the final one to 1e-4 relative (tests/fixtures/perplexity/
// llama-perplexity.txt, written by scripts/perplexity-ref.sh). The Llama 3 and Phi-3 files add
// BOS, the Qwen files do not: each chunk starts with BOS only where the file adds one, as
// llama-perplexity does, or the Qwen estimates would differ. Both run with f32 caches (llama.cpp
// with flash attention off): the two round an f16 cache at different points, which moves
// gemma3's first chunk by 1.8e-4 (llama.cpp's own flash attention on/off moves it by 3e-5).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "family-common.h"
#include "generate-run-common.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Expected {
    std::string family;
    double final_ppl = 0;
    std::vector<double> chunks;
};

std::vector<Expected> read_expected() {
    std::istringstream in(read_file(std::string(KVG_SOURCE_DIR) + "/tests/fixtures/perplexity/llama-perplexity.txt"));
    std::vector<Expected> out;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream f(line);
        Expected e;
        size_t n = 0;
        f >> e.family >> n >> e.final_ppl;
        for (double v; f >> v;) e.chunks.push_back(v);
        REQUIRE_MESSAGE(e.chunks.size() == n, line);
        out.push_back(e);
    }
    REQUIRE(out.size() == 10);
    return out;
}

// kvg-perplexity's estimates: "[1]x,[2]y,..." then "Final estimate: PPL = z over N tokens".
Expected parse_output(const std::string & out) {
    Expected e;
    for (size_t at = out.find('['); at != std::string::npos; at = out.find('[', at + 1)) {
        const size_t close = out.find(']', at);
        REQUIRE(close != std::string::npos);
        CHECK(std::strtol(out.c_str() + at + 1, nullptr, 10) == (long) e.chunks.size() + 1);
        e.chunks.push_back(std::strtod(out.c_str() + close + 1, nullptr));
    }
    const std::string key = "Final estimate: PPL = ";
    const size_t at = out.find(key);
    REQUIRE(at != std::string::npos);
    e.final_ppl = std::strtod(out.c_str() + at + key.size(), nullptr);
    return e;
}

double rel(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

} // namespace

TEST_CASE("kvg-perplexity equals llama-perplexity on each family's tiny model, to 1e-4 relative") {
    const std::string tool = generate_run::tool_path("kvg-perplexity", "KVG_PERPLEXITY");
    if (tool.empty()) {
        MESSAGE("kvg-perplexity not built: skipped (set KVG_PERPLEXITY to its path)");
        return;
    }
    const std::string text = std::string(KVG_SOURCE_DIR) + "/tests/fixtures/perplexity/text.txt";
    for (const Expected & want : read_expected()) {
        CAPTURE(want.family);
        const family_twin::Family f = family_twin::family(want.family);
        if (family_twin::vocab_path(f).empty()) {
            MESSAGE(want.family << ": " << f.vocab_file
                                << " is in neither ../shared/vocab nor $LLAMA_CPP_MODELS: skipped");
            continue;
        }
        const family_twin::TempFile model{temp_path("ppl", want.family + ".gguf")};
        family_twin::write_model(f, model.path);
        const generate_run::Run run = generate_run::generate(
            {"-m", model.path, "-f", text, "-c", "64", "-b", "64", "-t", "1", "--kv-type", "f32"}, "", tool);
        INFO(run.err);
        REQUIRE(run.code == 0);
        const Expected got = parse_output(run.out);
        REQUIRE(got.chunks.size() == want.chunks.size());
        double worst = rel(got.final_ppl, want.final_ppl);
        for (size_t i = 0; i < want.chunks.size(); ++i) {
            CAPTURE(i);
            CHECK(rel(got.chunks[i], want.chunks[i]) < 1e-4);
            worst = std::max(worst, rel(got.chunks[i], want.chunks[i]));
        }
        CHECK(rel(got.final_ppl, want.final_ppl) < 1e-4);
        MESSAGE(want.family << ": PPL " << got.final_ppl << " (llama.cpp " << want.final_ppl << "), "
                            << want.chunks.size() << " chunks, largest relative difference " << worst);
    }
}
