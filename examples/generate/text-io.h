// Text in and out for the generation examples (kvg-generate, kvg-speculative).
#pragma once

#include "kvgraph.h"

#include <string>
#include <vector>

double now_s(); // seconds on a steady clock
// BOS + the tokenized text; without a tokenizer only an empty text (BOS alone) works (false
// with a message otherwise).
bool prompt_tokens(kvg_model * model, const std::string & text, std::vector<kvg_token> * out);
// Text of one token after prev (token ids without a tokenizer), whatever its length.
std::string piece(kvg_model * model, kvg_token prev, kvg_token tok);
// Does text end with one of the stop strings?
bool ends_with_stop(const std::string & text, const std::vector<std::string> & stop);
