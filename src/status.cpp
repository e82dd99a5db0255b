// kvg_status bookkeeping (status.h explains who sets what).
#include "status.h"

#include <cstring>

namespace {
thread_local kvg_status g_noted = KVG_STATUS_OK; // by the code that found the failure
thread_local kvg_status g_last = KVG_STATUS_OK;  // of the last C API call that reports errors
} // namespace

namespace kvg {
void note_status(kvg_status status) { g_noted = status; }
void start_status() { g_noted = g_last = KVG_STATUS_OK; }
void fail_status(kvg_status fallback) { g_last = g_noted != KVG_STATUS_OK ? g_noted : fallback; }
} // namespace kvg

kvg_status kvg_last_status(void) { return g_last; }

const char * kvg_status_name(kvg_status status) {
    // C may pass any int: read it as one (a C++ load of an out-of-range enum is undefined)
    int value;
    std::memcpy(&value, &status, sizeof value);
    switch (value) {
        case KVG_STATUS_OK: return "ok";
        case KVG_STATUS_BAD_INPUT: return "bad input";
        case KVG_STATUS_CONTEXT_FULL: return "context full";
        case KVG_STATUS_UNSUPPORTED: return "unsupported";
        case KVG_STATUS_OUT_OF_MEMORY: return "out of memory";
        case KVG_STATUS_IO: return "i/o error";
        case KVG_STATUS_BAD_FILE: return "bad file";
    }
    return "unknown";
}
