// Chat templates (kvg_chat_apply_template): the conversation formats of the common chat
// models, recognized as llama.cpp's llama_chat_apply_template recognizes them (a short name,
// else substrings of the file's Jinja text, tested in llama.cpp's order) and written byte for
// byte as it writes them. No Jinja is interpreted: a template is only ever one of these
// families. tests/test-chat.cpp compares every family with llama.cpp's output.
#include "api-impl.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <string>

using kvg::begin_call;
using kvg::set_err;

namespace {

enum class Family {
    chatml,
    phi4,
    llama2,
    llama2_sys,
    llama2_sys_bos,
    llama2_sys_strip,
    mistral_v1,
    mistral_v3,
    mistral_v3_tekken,
    mistral_v7,
    mistral_v7_tekken,
    phi3,
    gemma,
    llama3,
    other, // a template kvgraph does not format
};

struct Named {
    const char * name;
    Family family;
};
const Named NAMES[] = {
    {"chatml", Family::chatml},
    {"phi4", Family::phi4},
    {"llama2", Family::llama2},
    {"llama2-sys", Family::llama2_sys},
    {"llama2-sys-bos", Family::llama2_sys_bos},
    {"llama2-sys-strip", Family::llama2_sys_strip},
    {"mistral-v1", Family::mistral_v1},
    {"mistral-v3", Family::mistral_v3},
    {"mistral-v3-tekken", Family::mistral_v3_tekken},
    {"mistral-v7", Family::mistral_v7},
    {"mistral-v7-tekken", Family::mistral_v7_tekken},
    {"phi3", Family::phi3},
    {"gemma", Family::gemma},
    {"llama3", Family::llama3},
};

// What detection found: a family, or for `other` the name of llama.cpp's family when the text
// is one of those it tests before Llama 3 ("" when it is none kvgraph can name).
struct Detected {
    Family family;
    std::string other;
};

bool has(const std::string & s, const char * sub) { return s.find(sub) != std::string::npos; }

// The [INST] families: Mistral's official templates by their markers, else Llama 2's variants.
Family detect_inst(const std::string & t) {
    if (has(t, "[SYSTEM_PROMPT]")) return Family::mistral_v7;
    if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
        if (has(t, " [INST]")) return Family::mistral_v1;
        return has(t, "\"[INST]\"") ? Family::mistral_v3_tekken : Family::mistral_v3;
    }
    if (has(t, "content.strip()")) return Family::llama2_sys_strip;
    if (has(t, "bos_token + '[INST]")) return Family::llama2_sys_bos;
    return has(t, "<<SYS>>") ? Family::llama2_sys : Family::llama2;
}

// llama.cpp's detection up to Llama 3, the last family kvgraph formats. The families it tests
// in between are named so that a text holding their markers is refused as llama.cpp reads it,
// never formatted as a later family whose markers it also holds.
Detected detect(const std::string & t) {
    for (const Named & n : NAMES) {
        if (t == n.name) return {n.family, ""};
    }
    if (has(t, "<|im_start|>")) {
        if (has(t, "<|im_sep|>")) return {Family::phi4, ""};
        if (has(t, "<end_of_utterance>")) return {Family::other, "smolvlm"};
        return {Family::chatml, ""};
    }
    if (t.compare(0, 7, "mistral") == 0 || has(t, "[INST]")) return {detect_inst(t), ""};
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return {Family::phi3, ""};
    struct Marker {
        const char * a;
        const char * b; // also required unless nullptr
        const char * name;
    };
    static const Marker others[] = {
        {"[gMASK]<sop>", nullptr, "chatglm4"},
        {"<|assistant|>", "<|user|>", "falcon3, glmedge or exaone-moe"},
        {"<|{{ item['role'] }}|>", "<|begin_of_image|>", "glmedge"},
        {"<|user|>", "<|endoftext|>", "zephyr"},
        {"bos_token + message['role']", nullptr, "monarch"},
        {"<start_of_turn>", nullptr, ""}, // gemma: formatted below
        {"'\\n\\nAssistant: ' + eos_token", nullptr, "orion"},
        {"GPT4 Correct ", nullptr, "openchat"},
        {"USER: ", "ASSISTANT: ", "vicuna"},
        {"### Instruction:", "<|EOT|>", "deepseek"},
        {"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "command-r"},
    };
    for (const Marker & m : others) {
        if (!has(t, m.a) || (m.b && !has(t, m.b))) continue;
        if (!*m.name) return {Family::gemma, ""};
        return {Family::other, m.name};
    }
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return {Family::llama3, ""};
    return {Family::other, ""};
}

// Whitespace of the C locale off both ends (Python's str.strip on ASCII text).
std::string trim(const char * s) {
    std::string r(s);
    size_t b = 0, e = r.size();
    while (b < e && std::isspace((unsigned char) r[b])) ++b;
    while (e > b && std::isspace((unsigned char) r[e - 1])) --e;
    return r.substr(b, e - b);
}

using Messages = std::vector<kvg_chat_message>;

// Llama 2 ([INST] turns, the system prompt inside the first one) and its variants.
void format_llama2(Family f, const Messages & msgs, std::string & out) {
    const bool sys_tags = f != Family::llama2, bos_inside = f == Family::llama2_sys_bos,
               strip = f == Family::llama2_sys_strip;
    bool in_turn = true; // the first [INST] has no BOS before it
    out += "[INST] ";
    for (const kvg_chat_message & m : msgs) {
        const std::string role = m.role, content = strip ? trim(m.content) : std::string(m.content);
        if (!in_turn) {
            in_turn = true;
            out += bos_inside ? "<s>[INST] " : "[INST] ";
        }
        if (role == "system") {
            out += sys_tags ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
        } else if (role == "user") {
            out += content + " [/INST]";
        } else {
            out += content + "</s>";
            in_turn = false;
        }
    }
}

// Mistral v1 / v3 / v3-tekken: one [INST] block per exchange, the system prompt inside it.
void format_mistral(Family f, const Messages & msgs, std::string & out) {
    const std::string lead = f == Family::mistral_v1 ? " " : "", trail = f == Family::mistral_v3_tekken ? "" : " ";
    bool in_turn = false;
    for (const kvg_chat_message & m : msgs) {
        if (!in_turn) {
            out += lead + "[INST]" + trail;
            in_turn = true;
        }
        const std::string role = m.role;
        if (role == "system") {
            out += std::string(m.content) + "\n\n";
        } else if (role == "user") {
            out += std::string(m.content) + lead + "[/INST]";
        } else {
            out += trail + (f == Family::mistral_v3 ? trim(m.content) : std::string(m.content)) + "</s>";
            in_turn = false;
        }
    }
}

// Mistral v7 (and tekken, without the spaces): every role has its own tags.
void format_mistral_v7(Family f, const Messages & msgs, std::string & out) {
    const std::string sp = f == Family::mistral_v7 ? " " : "";
    for (const kvg_chat_message & m : msgs) {
        const std::string role = m.role;
        if (role == "system") {
            out += "[SYSTEM_PROMPT]" + sp + m.content + "[/SYSTEM_PROMPT]";
        } else if (role == "user") {
            out += "[INST]" + sp + m.content + "[/INST]";
        } else {
            out += sp + m.content + "</s>";
        }
    }
}

// Gemma has no system role: the (trimmed) system text opens the next user turn.
void format_gemma(const Messages & msgs, bool add_assistant, std::string & out) {
    std::string system;
    for (const kvg_chat_message & m : msgs) {
        std::string role = m.role;
        if (role == "system") {
            system += trim(m.content);
            continue;
        }
        if (role == "assistant") role = "model";
        out += "<start_of_turn>" + role + "\n";
        if (!system.empty() && role != "model") {
            out += system + "\n\n";
            system.clear();
        }
        out += trim(m.content) + "<end_of_turn>\n";
    }
    if (add_assistant) out += "<start_of_turn>model\n";
}

// The families where each message is "open + role + sep + content + close".
void format_simple(Family f, const Messages & msgs, bool add_assistant, std::string & out) {
    for (const kvg_chat_message & m : msgs) {
        switch (f) {
            case Family::chatml: out += std::string("<|im_start|>") + m.role + "\n" + m.content + "<|im_end|>\n"; break;
            case Family::phi4:
                out += std::string("<|im_start|>") + m.role + "<|im_sep|>" + m.content + "<|im_end|>";
                break;
            case Family::phi3: out += std::string("<|") + m.role + "|>\n" + m.content + "<|end|>\n"; break;
            default: // llama3
                out += std::string("<|start_header_id|>") + m.role + "<|end_header_id|>\n\n" + trim(m.content) +
                       "<|eot_id|>";
        }
    }
    if (!add_assistant) return;
    switch (f) {
        case Family::chatml: out += "<|im_start|>assistant\n"; break;
        case Family::phi4: out += "<|im_start|>assistant<|im_sep|>"; break;
        case Family::phi3: out += "<|assistant|>\n"; break;
        default: out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    }
}

// The [INST] families end where the messages end, whatever add_assistant says (as llama.cpp).
void format(Family f, const Messages & msgs, bool add_assistant, std::string & out) {
    switch (f) {
        case Family::llama2:
        case Family::llama2_sys:
        case Family::llama2_sys_bos:
        case Family::llama2_sys_strip: format_llama2(f, msgs, out); break;
        case Family::mistral_v1:
        case Family::mistral_v3:
        case Family::mistral_v3_tekken: format_mistral(f, msgs, out); break;
        case Family::mistral_v7:
        case Family::mistral_v7_tekken: format_mistral_v7(f, msgs, out); break;
        case Family::gemma: format_gemma(msgs, add_assistant, out); break;
        default: format_simple(f, msgs, add_assistant, out);
    }
}

// The start of a template for a message: about 40 bytes, cut between UTF-8 characters,
// newlines shown as \n.
std::string excerpt(const std::string & t) {
    size_t n = std::min<size_t>(t.size(), 40);
    while (n < t.size() && ((unsigned char) t[n] & 0xC0) == 0x80) --n;
    std::string r;
    for (size_t i = 0; i < n; ++i) r += t[i] == '\n' ? std::string("\\n") : std::string(1, t[i]);
    return n < t.size() ? r + "..." : r;
}

std::string unsupported_message(const std::string & t, const std::string & other) {
    std::string msg = "chat template '" + excerpt(t) + "' is not one kvgraph formats";
    if (!other.empty()) msg += " (llama.cpp reads it as " + other + ")";
    return msg + "; supported: llama3, chatml, phi3, phi4, gemma, mistral-v1, mistral-v3, mistral-v3-tekken, "
                 "mistral-v7, mistral-v7-tekken, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, or a "
                 "Jinja text of one of them";
}

} // namespace

int32_t kvg_chat_apply_template(const kvg_model * model, const char * tmpl, const kvg_chat_message * messages,
                                size_t n_msg, bool add_assistant, char * buf, int32_t size, char * err,
                                size_t err_size) try {
    begin_call(err, err_size);
    if (!tmpl && !model) {
        set_err(err, err_size, "no template and no model to take it from");
        return -1;
    }
    if (!messages && n_msg > 0) {
        set_err(err, err_size, "no messages");
        return -1;
    }
    Messages msgs(messages, messages + n_msg);
    for (size_t i = 0; i < n_msg; ++i) {
        if (!msgs[i].role || !msgs[i].content) {
            set_err(err, err_size, "message " + std::to_string(i) + " has no role or content");
            return -1;
        }
    }
    // A file without a template gets chatml, as in llama.cpp.
    const std::string text = tmpl ? tmpl : model->m->chat_template.empty() ? "chatml" : model->m->chat_template;
    const Detected d = detect(text);
    if (d.family == Family::other) {
        set_err(err, err_size, unsupported_message(text, d.other), KVG_STATUS_UNSUPPORTED);
        return -1;
    }
    std::string out;
    format(d.family, msgs, add_assistant, out);
    if (out.size() > (size_t) INT32_MAX) {
        set_err(err, err_size, "the formatted conversation is over INT32_MAX bytes");
        return -1;
    }
    if (buf && size > 0) {
        const size_t n = std::min(out.size() + 1, (size_t) size); // the NUL when it fits
        std::memcpy(buf, out.c_str(), n);
    }
    return (int32_t) out.size();
} catch (...) {
    kvg::set_exception_err(err, err_size, "kvg_chat_apply_template");
    return -1;
}
