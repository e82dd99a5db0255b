#!/usr/bin/env bash
# llama.cpp over kvgraph workers: builds llama.cpp's RPC client into its tools outside this
# tree, starts two kvg-rpc-servers and two of ggml's rpc-servers, and checks:
#   1. the shipped model's greedy text with its layers on two kvgraph workers equals the local run
#      (llama.cpp's default attention, flash on the CPU; with -fa off the outcome is printed
#      only: there the text departs after "thou shalt be", as kvg-generate's own matmul
#      attention over an f16 cache does, a near-tie that rounding decides);
#   2. its perplexity on tests/fixtures/perplexity/text.txt: local, ggml's workers, kvgraph's
#      workers (relative difference to ggml's workers at most 1e-3);
#   3. with MODEL (a larger GGUF, e.g. the 1.1B file): the same perplexity check, and tokens/s
#      of a 128-token prompt and 32 generated tokens on kvgraph's workers vs ggml's;
#   4. llama.cpp's test-backend-ops against a kvgraph worker (-b RPC0): per op, cases passed,
#      failed, and refused by the server (scripts/rpc-backend-ops.py; with OPS="ADD,MUL" only those).
#
#   scripts/check-rpc.sh LLAMA_CPP_SRC [MODEL]
#
# LLAMA_CPP_SRC: llama.cpp's source (the node-llama-cpp package ships it). Its CPU build with
# shared libraries is made in $PEER_BUILD (default LLAMA_CPP_SRC/build) if that has no
# libllama.so. ggml-rpc's client is compiled beside it into $OUT (default /tmp/kvg-check-rpc)
# with a few lines that add the servers named in $KVG_RPC_ENDPOINTS to ggml's registry before
# main runs (the build's registry does not know RPC). Nothing of llama.cpp enters this tree.
# THREADS (default 1) per worker and client. Exit status: 0 if checks 1-3 hold.
set -euo pipefail
cd "$(dirname "$0")/.."
src="$(cd "${1:?usage: $0 LLAMA_CPP_SRC [MODEL]}" && pwd)"
model="${2:-}"
peer="${PEER_BUILD:-$src/build}"
out="${OUT:-/tmp/kvg-check-rpc}"
threads="${THREADS:-1}"
mkdir -p "$out"

echo "== kvgraph: kvg-rpc-server"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > "$out/kvg-cmake.log"
cmake --build build -j "$(nproc)" --target kvg-rpc-server > "$out/kvg-build.log"

if [ ! -e "$peer/bin/libllama.so" ]; then
    echo "== llama.cpp: CPU build with shared libraries in $peer"
    cmake -S "$src" -B "$peer" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF > "$out/peer-cmake.log"
    cmake --build "$peer" -j "$(nproc)" --target llama llama-common > "$out/peer-build.log"
fi

echo "== llama.cpp's RPC client, tools and test-backend-ops in $out"
cat > "$out/add-rpc.cpp" << 'CPP'
// Before main: the servers in $KVG_RPC_ENDPOINTS (HOST:PORT,...) become devices RPC0, RPC1...,
// and ggml's RPC registry is registered (rpc-server looks it up by name).
#include "ggml-backend.h"
#include "ggml-rpc.h"
#include <cstdlib>
#include <sstream>
#include <string>
namespace {
struct AddRpc {
    AddRpc() {
        const char * list = std::getenv("KVG_RPC_ENDPOINTS");
        if (!list || !*list) {
            ggml_backend_register(ggml_backend_rpc_reg());
            return;
        }
        std::stringstream ss(list);
        for (std::string ep; std::getline(ss, ep, ',');)
            if (ggml_backend_reg_t reg = ggml_backend_rpc_add_server(ep.c_str())) ggml_backend_register(reg);
    }
} add_rpc;
} // namespace
CPP
inc=(-I"$src/ggml/include" -I"$src/ggml/src" -I"$src/include" -I"$src/common" -I"$src/vendor"
     -I"$src/tools/perplexity" -I"$src/tools/completion")
compile() { # source object
    [ "$2" -nt "$1" ] || c++ -O2 -std=c++17 -fPIC "${inc[@]}" -c "$1" -o "$2"
}
compile "$src/ggml/src/ggml-rpc/ggml-rpc.cpp" "$out/ggml-rpc.o"
compile "$src/ggml/src/ggml-rpc/transport.cpp" "$out/transport.o"
compile "$out/add-rpc.cpp" "$out/add-rpc.o"
libs=(-L"$peer/bin" -Wl,-rpath,"$peer/bin" -lllama-common -lllama -lggml -lggml-base -lggml-cpu -lpthread)
rpc_objs=("$out/add-rpc.o" "$out/ggml-rpc.o" "$out/transport.o")
link() { # binary sources...
    local bin="$1"
    shift
    [ -x "$out/$bin" ] || c++ -O2 -std=c++17 "${inc[@]}" "$@" "${rpc_objs[@]}" "${libs[@]}" -o "$out/$bin"
}
link llama-completion "$src/tools/completion/main.cpp" "$src/tools/completion/completion.cpp"
link llama-perplexity "$src/tools/perplexity/main.cpp" "$src/tools/perplexity/perplexity.cpp"
link rpc-server "$src/tools/rpc/rpc-server.cpp"
link test-backend-ops "$src/tests/test-backend-ops.cpp"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() { # log command...
    local log="$1"
    shift
    "$@" > "$log" 2>&1 &
    pids+=($!)
}
k1=$(free_port); k2=$(free_port); g1=$(free_port); g2=$(free_port); ks=$(free_port)
start "$out/kvg1.log" build/bin/kvg-rpc-server -p "$k1" -t "$threads"
start "$out/kvg2.log" build/bin/kvg-rpc-server -p "$k2" -t "$threads"
start "$out/ggml1.log" "$out/rpc-server" -p "$g1" -t "$threads"
start "$out/ggml2.log" "$out/rpc-server" -p "$g2" -t "$threads"
start "$out/kvg-skip.log" build/bin/kvg-rpc-server -p "$ks" -t "$threads" --skip-refused-graphs
sleep 2
kvg="127.0.0.1:$k1,127.0.0.1:$k2"
ggml="127.0.0.1:$g1,127.0.0.1:$g2"
status=0

echo "== 1. greedy text of models/kjv-tiny.gguf: local vs two kvgraph workers"
gen() { # endpoints model extra args...
    local ep="$1" m="$2"
    shift 2
    KVG_RPC_ENDPOINTS="$ep" "$out/llama-completion" -m "$m" -p "And God said" -n 64 --temp 0 -no-cnv \
        -t "$threads" -ngl 99 --no-warmup "$@" 2> "$out/gen.err"
}
gen "" models/kjv-tiny.gguf > "$out/text-local.txt"
gen "$kvg" models/kjv-tiny.gguf > "$out/text-kvg.txt"
if cmp -s "$out/text-local.txt" "$out/text-kvg.txt"; then echo "same text ($(wc -c < "$out/text-local.txt") bytes)"; else
    echo "FAIL: texts differ"; diff "$out/text-local.txt" "$out/text-kvg.txt" || true; status=1; fi
gen "" models/kjv-tiny.gguf -fa off > "$out/text-local-fa0.txt"
gen "$kvg" models/kjv-tiny.gguf -fa off > "$out/text-kvg-fa0.txt"
cmp -s "$out/text-local-fa0.txt" "$out/text-kvg-fa0.txt" && echo "-fa off: same text" ||
    echo "-fa off: the texts differ from byte $(cmp "$out/text-local-fa0.txt" "$out/text-kvg-fa0.txt" | sed 's/.*byte \([0-9]*\).*/\1/') (not a failure, see above)"

ppl() { # endpoints model ctx
    KVG_RPC_ENDPOINTS="$1" "$out/llama-perplexity" -m "$2" -f tests/fixtures/perplexity/text.txt -c "$3" \
        -t "$threads" -ngl 99 -fa off 2>&1 | sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p'
}
ppl_check() { # model ctx
    local local_ppl ggml_ppl kvg_ppl
    local_ppl=$(ppl "" "$1" "$2"); ggml_ppl=$(ppl "$ggml" "$1" "$2"); kvg_ppl=$(ppl "$kvg" "$1" "$2")
    echo "PPL local $local_ppl, ggml's workers $ggml_ppl, kvgraph's workers $kvg_ppl"
    python3 -c "import sys; g,k=float('$ggml_ppl'),float('$kvg_ppl'); r=abs(k-g)/g; print('relative difference to ggml\'s workers: %.2e' % r); sys.exit(r > 1e-3)" || status=1
}
echo "== 2. perplexity of models/kjv-tiny.gguf"
ppl_check models/kjv-tiny.gguf 64

if [ -n "$model" ]; then
    echo "== 3. $model: perplexity, then tokens/s (kvgraph's workers / ggml's, alternated twice)"
    ppl_check "$model" 128
    prompt=$(python3 -c "print(' '.join(['the']*127))")
    for rep in 1 2; do
        for side in ggml kvg; do
            ep=$ggml; [ $side = kvg ] && ep=$kvg
            KVG_RPC_ENDPOINTS="$ep" "$out/llama-completion" -m "$model" -p "$prompt" -n 32 --temp 0 -no-cnv \
                -t "$threads" -ngl 99 --no-warmup -fa off > /dev/null 2> "$out/speed.err"
            printf '%-5s %s\n' "$side" "$(grep -E 'eval time' "$out/speed.err" | sed 's/.*(//; s/)//' | tr '\n' ' ')"
        done
    done
fi

echo "== 4. test-backend-ops -b RPC0 against kvg-rpc-server --skip-refused-graphs"
python3 scripts/rpc-backend-ops.py "$out/test-backend-ops" "127.0.0.1:$ks" "$out/kvg-skip.log" "${OPS:-}" \
    | tee "$out/backend-ops.md"
exit $status
