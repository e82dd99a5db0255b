#!/usr/bin/env bash
# Formatting check: the C and C++ lines that changed since BASE (committed or not) must be as
# clang-format formats them with .clang-format. Only changed lines are checked: the tree is not
# reformatted as a whole, so old code keeps its layout until someone edits it. The public headers
# are not checked: .clang-format leaves them their hand-aligned declaration blocks.
#
#   scripts/check-format.sh          # BASE = HEAD~1: the last commit and any uncommitted change
#   scripts/check-format.sh BASE     # e.g. origin/main, or HEAD~5 for the last five commits
#   scripts/check-format.sh BASE PATH...   # only these files or folders
#
# Uses Debian's clang-format-14 (CLANG_FORMAT overrides): another version formats some lines
# differently. On a failure it prints clang-format's diff; `git clang-format-14 BASE` applies it.
# .ci/run calls it in a clone of main, where it checks the last commit.
set -euo pipefail
cd "$(dirname "$0")/.."

base="${1:-HEAD~1}"
shift || true
clang_format="${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}"
git_clang_format="$(command -v git-clang-format-14 || command -v git-clang-format || true)"
if [ -z "$clang_format" ] || [ -z "$git_clang_format" ]; then
    echo "check-format: clang-format-14 and git-clang-format not found (apt-get install clang-format)" >&2
    exit 1
fi
if ! git rev-parse -q --verify "$base^{commit}" > /dev/null; then
    # a shallow clone has no parent to compare with: say so rather than pass unchecked
    echo "check-format: base '$base' is not a commit here (a shallow clone? fetch more history)" >&2
    exit 1
fi

# the project's own code, but not the public headers (ggml/include, include): .clang-format
# leaves them their hand-aligned declaration blocks, which clang-format would undo
paths=(ggml/src src examples tests)
[ $# -gt 0 ] && paths=("$@")
# git-clang-format 14 exits 0 even when it has a diff: the diff's presence is the verdict
out="$("$git_clang_format" --binary "$clang_format" --diff "$base" -- "${paths[@]}")"
if grep -q '^diff ' <<< "$out"; then
    echo "$out"
    echo "check-format: the lines above changed since $base and are not formatted (.clang-format)" >&2
    exit 1
fi
echo "check-format: lines changed since $(git rev-parse --short "$base") are formatted ($("$clang_format" --version | head -1))"
