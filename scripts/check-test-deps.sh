#!/usr/bin/env bash
# `make test` needs doctest (Debian: doctest-dev). If CMake did not find it: as root with
# apt-get, install it and configure again; otherwise stop with the command to run.
#   scripts/check-test-deps.sh BUILD_DIR
set -euo pipefail
build="${1:-build}"
found() { grep -q '^doctest_DIR:PATH=/' "$build/CMakeCache.txt" 2> /dev/null; }
found && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    echo "make test: doctest is missing; installing Debian's doctest-dev (running as root)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends doctest-dev > /dev/null ||
        { apt-get update > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends doctest-dev > /dev/null; }
    cmake "$build" > /dev/null
    found && exit 0
fi
echo "make test: the tests need doctest; install it with: sudo apt-get install -y doctest-dev" >&2
exit 1
