// Text in and out for the generation examples: the prompt's tokens, token pieces, stop
// strings, a clock (shared by kvg-generate and kvg-speculative).
#include "text-io.h"

#include <chrono>
#include <climits>
#include <cstdio>

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// BOS + the tokenized text; without a tokenizer only an empty text (BOS alone) works.
bool prompt_tokens(kvg_model * model, const std::string & text, std::vector<kvg_token> * out) {
    out->clear();
    if (!kvg_model_has_vocab(model)) {
        if (!text.empty()) {
            fprintf(stderr, "error: the model has no tokenizer (pass -z tokenizer.bin); without one only an empty prompt works\n");
            return false;
        }
        out->push_back(kvg_model_bos(model));
        return true;
    }
    const int32_t n = kvg_tokenize(model, text.c_str(), true, nullptr, 0);
    out->resize(-n);
    kvg_tokenize(model, text.c_str(), true, out->data(), (int32_t) out->size());
    return true;
}

// Text of one token after prev (token ids without a tokenizer), whatever its length.
std::string piece(kvg_model * model, kvg_token prev, kvg_token tok) {
    if (!kvg_model_has_vocab(model)) return std::to_string(tok) + " ";
    std::vector<char> buf(256);
    int32_t n = kvg_token_to_piece(model, prev, tok, buf.data(), (int32_t) buf.size());
    if (n < 0 && n != INT32_MIN) { // -(length): too long for the buffer
        buf.resize((size_t) -n + 1);
        n = kvg_token_to_piece(model, prev, tok, buf.data(), (int32_t) buf.size());
    }
    return n > 0 ? std::string(buf.data(), n) : std::string();
}

// Does text end with one of the stop strings?
bool ends_with_stop(const std::string & text, const std::vector<std::string> & stop) {
    for (const std::string & s : stop) {
        if (!s.empty() && text.size() >= s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) return true;
    }
    return false;
}
