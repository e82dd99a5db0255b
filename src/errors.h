// How the runtime's internals report a failure: a message in *err, and, where it is not the
// C API's default for the call, a status (kvg_status). One writer for every file of src/.
#pragma once

#include "kvgraph.h"

#include <string>

namespace kvg {

std::string strfmt(const char * fmt, ...) __attribute__((format(printf, 1, 2)));

// Sets *err (when given) and returns false.
bool fail(std::string * err, const std::string & msg);
// A failure whose kind is not the C API's default for the call (kvg_status).
bool fail(std::string * err, kvg_status status, const std::string & msg);

// Opens path for reading if it is a regular file (a FIFO would block, a directory cannot be
// read); -1 with a message and KVG_STATUS_IO otherwise. The caller closes the descriptor.
int open_regular(const std::string & path, std::string * err);

} // namespace kvg
