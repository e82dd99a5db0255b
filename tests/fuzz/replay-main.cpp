// Runs a fuzz target once on every file given or found in the directories given (no
// libFuzzer needed): the seed corpus as a regression test. Exit status 0 if all ran.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

static bool run_file(const std::filesystem::path & p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) {
        std::fprintf(stderr, "cannot read %s\n", p.c_str());
        return false;
    }
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // an empty vector may have no buffer; libFuzzer passes a valid pointer
    static const uint8_t empty = 0;
    LLVMFuzzerTestOneInput(data.empty() ? &empty : data.data(), data.size());
    return true;
}

int main(int argc, char ** argv) {
    int n_files = 0;
    bool ok = true;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path p = argv[i];
        if (std::filesystem::is_directory(p)) {
            std::vector<std::filesystem::path> files;
            for (const auto & e : std::filesystem::directory_iterator(p)) {
                if (e.is_regular_file()) files.push_back(e.path());
            }
            std::sort(files.begin(), files.end());
            for (const auto & f : files) ok = run_file(f) && ok, ++n_files;
        } else {
            ok = run_file(p) && ok;
            ++n_files;
        }
    }
    std::printf("%d inputs ran without a crash\n", n_files);
    if (n_files == 0) {
        std::fprintf(stderr, "no inputs given\n");
        return 1;
    }
    return ok ? 0 : 1;
}
