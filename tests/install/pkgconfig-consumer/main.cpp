// An installed-kvgraph consumer in C++, built with `pkg-config --cflags --libs kvgraph`:
// loads a model through the runtime API and decodes greedily.
#include <kvgraph.h>

#include <cstdio>
#include <vector>

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [TOKENIZER]\n", argv[0]);
        return 2;
    }
    char err[512] = {0};
    kvg_model * model = kvg_model_load(argv[1], argc > 2 ? argv[2] : nullptr, kvg_model_default_params(), err, sizeof(err));
    if (!model) {
        fprintf(stderr, "load failed: %s\n", err);
        return 1;
    }
    kvg_context_params cp = kvg_context_default_params();
    cp.n_ctx = 64;
    kvg_context * ctx = kvg_context_new(model, cp, err, sizeof(err));
    if (!ctx) {
        fprintf(stderr, "context failed: %s\n", err);
        return 1;
    }
    kvg_token tok = kvg_model_bos(model);
    std::vector<kvg_token> out;
    for (int pos = 0; pos < 8; ++pos) {
        const float * logits = kvg_decode(ctx, &tok, 1, pos, err, sizeof(err));
        if (!logits) {
            fprintf(stderr, "decode failed: %s\n", err);
            return 1;
        }
        tok = kvg_argmax(logits, kvg_model_n_vocab(model));
        out.push_back(tok);
    }
    for (kvg_token t : out) printf("%d ", t);
    printf("\n");
    kvg_context_free(ctx);
    kvg_model_free(model);
    return 0;
}
