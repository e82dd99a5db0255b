// kvg-generate -cnv: a conversation with a chat model, user turns read from standard input.
#pragma once

#include "kvgraph.h"
#include "options.h"

// One user turn per line of stdin until its end; each reply is streamed to stdout and ends
// at an end-of-generation token (or after -n tokens). 0 on success, 1 with a message.
int run_conversation(kvg_model * model, kvg_context * ctx, kvg_sampler * smpl, const options & o);
