// Why an error happened, beside its message: the kvg_status of kvgraph.h. The place that
// detects a failure knows its kind (a file that cannot be read, a position past the
// cache); the C API, which writes the message, reads the kind here. Thread-local, like
// errno: one call's failure never shows in another thread.
#pragma once

#include "kvgraph.h"

namespace kvg {

// Marks the failure being reported now. The C API clears it when a call starts and uses
// its own default (per function) when nothing deeper marked one.
void note_status(kvg_status status);
// The C API's side: a call starts (status OK, nothing noted), a call fails (the noted
// kind, else the call's fallback, becomes kvg_last_status()).
void start_status();
void fail_status(kvg_status fallback);

} // namespace kvg
