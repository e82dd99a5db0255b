// The complete C program in kvgraph.h's header comment (compiled from there as C by
// tests/CMakeLists.txt) generates, greedily, the text of the token ids an independent
// PyTorch implementation produced (fixtures/stories260K.greedy.txt), and fails cleanly.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "kvgraph.h"
#include "test-common.h"

#include <cstdio>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace {

struct Run {
    std::string out;
    int exit_code;
};

Run run(const std::string & args) {
    const std::string cmd = std::string(KVG_HEADER_EXAMPLE) + " " + args + " 2>/dev/null";
    FILE * p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    Run r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::vector<kvg_token> fixture_ids(const std::string & name) {
    std::vector<kvg_token> ids;
    std::istringstream in(read_file(shared_dir() + "/fixtures/" + name));
    for (int id; in >> id;) ids.push_back(id);
    return ids;
}

} // namespace

TEST_CASE("the header's example program generates the reference greedy text") {
    const std::vector<kvg_token> ids = fixture_ids("stories260K.greedy.txt");
    REQUIRE(ids.size() == 64);
    char err[256];
    kvg_model * m = kvg_model_load(model_path("stories260K.bin").c_str(), model_path("tok512.bin").c_str(),
                                   kvg_model_default_params(), err, sizeof err);
    REQUIRE(m != nullptr);
    std::string expected(8192, '\0');
    const int32_t len = kvg_detokenize(m, ids.data(), (int32_t) ids.size(), &expected[0], (int32_t) expected.size());
    REQUIRE(len > 0);
    expected.resize((size_t) len);
    kvg_model_free(m);

    // an empty prompt is BOS alone, where the fixture starts; temperature 0 is greedy
    const Run r = run("'" + model_path("stories260K.bin") + "' '" + model_path("tok512.bin") + "' '' 64 0");
    CHECK(r.exit_code == 0);
    CHECK(r.out == expected + "\n");
}

TEST_CASE("the header's example program reports errors with a non-zero exit") {
    CHECK(run("/nonexistent/model.gguf").exit_code == 1);
    CHECK(run("").exit_code == 1); // usage
}
