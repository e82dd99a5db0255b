// kvg-convert-llama2c: llama2.c checkpoint (+ tokenizer.bin) -> GGUF (llama architecture,
// llama.cpp's keys and tensor names, tokenizer in tokenizer.ggml.*).
//
//   kvg-convert-llama2c stories15M.bin stories15M.gguf -z tokenizer.bin --type q8_0
//
// The input may also be a GGUF file: `--type bf16` on an f16 model is the offline form of
// ik_llama.cpp's run-time f16 -> bf16 repacking (bf16 prompt kernels, 3 fewer mantissa bits).
//
// Q/K rows are not permuted: llama.cpp's HF converter does that because HF checkpoints
// store rotate-half (NeoX) order, while llama2.c / Meta weights already rotate adjacent
// pairs, which is what ggml's rope mode 0 (llama.cpp's "normal" mode) expects.
// Without -z the file gets a placeholder vocabulary (<unk>, <s>, </s>, byte tokens, "[id]"
// pieces), or none with --no-vocab.
#include "kvgraph.h"

#include <cstdio>
#include <string>

static void usage(const char * argv0) {
    fprintf(stderr,
            "usage: %s MODEL.bin OUT.gguf [-z tokenizer.bin] [--type f32|f16|bf16|q8_0|q4_0|iq4_xs|tq1_0|tq2_0] "
            "[--no-vocab]\n"
            "  MODEL: a llama2.c checkpoint or a GGUF file. Matrices are written in --type (default f32);\n"
            "  norms stay f32; iq4_xs, tq1_0 and tq2_0 mix types as llama-quantize does (kvgraph.h,\n"
            "  kvg_model_save_gguf), and block-type matrices whose rows are not a multiple of 32 are f16\n",
            argv0);
}

int main(int argc, char ** argv) {
    std::string in, out, tok;
    kvg_ftype ftype = KVG_FTYPE_F32;
    bool no_vocab = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-z" && i + 1 < argc) tok = argv[++i];
        else if (a == "--type" && i + 1 < argc) {
            const std::string t = argv[++i];
            if (t == "f32") ftype = KVG_FTYPE_F32;
            else if (t == "f16") ftype = KVG_FTYPE_F16;
            else if (t == "bf16") ftype = KVG_FTYPE_BF16;
            else if (t == "q8_0") ftype = KVG_FTYPE_Q8_0;
            else if (t == "q4_0") ftype = KVG_FTYPE_Q4_0;
            else if (t == "iq4_xs") ftype = KVG_FTYPE_IQ4_XS;
            else if (t == "tq1_0") ftype = KVG_FTYPE_TQ1_0;
            else if (t == "tq2_0") ftype = KVG_FTYPE_TQ2_0;
            else {
                fprintf(stderr, "error: unknown type '%s' (f32, f16, bf16, q8_0, q4_0, iq4_xs, tq1_0, tq2_0)\n",
                        t.c_str());
                return 1;
            }
        } else if (a == "--no-vocab") no_vocab = true;
        else if (a == "-h" || a == "--help") {
            usage(argv[0]);
            return 0;
        } else if (!a.empty() && a[0] == '-') {
            fprintf(stderr, "error: unknown or incomplete option '%s'\n", a.c_str());
            usage(argv[0]);
            return 1;
        } else if (in.empty()) in = a;
        else if (out.empty()) out = a;
        else {
            usage(argv[0]);
            return 1;
        }
    }
    if (in.empty() || out.empty()) {
        usage(argv[0]);
        return 1;
    }

    char err[1024];
    kvg_model * model = kvg_model_load(in.c_str(), tok.empty() ? nullptr : tok.c_str(), kvg_model_default_params(), err, sizeof err);
    if (!model) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    fprintf(stderr, "loaded %s\n", kvg_model_desc(model));
    if (!kvg_model_save_gguf(model, out.c_str(), ftype, no_vocab, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        kvg_model_free(model);
        return 1;
    }
    kvg_model_free(model);

    // read it back: the file must load
    kvg_model * check = kvg_model_load(out.c_str(), nullptr, kvg_model_default_params(), err, sizeof err);
    if (!check) {
        fprintf(stderr, "error: the written file does not load: %s\n", err);
        return 1;
    }
    fprintf(stderr, "wrote %s: %s, %zu weight bytes%s\n", out.c_str(), kvg_model_desc(check), kvg_model_weight_bytes(check),
            kvg_model_has_vocab(check) ? (tok.empty() ? ", the input's vocabulary (a placeholder for a llama2.c checkpoint)" : ", tokenizer included") : ", no vocabulary");
    kvg_model_free(check);
    return 0;
}
