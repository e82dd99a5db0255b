#!/usr/bin/env python3
"""llama.cpp's test-backend-ops against a kvg-rpc-server started with --skip-refused-graphs:
per op, the cases that passed, failed, or were refused by the server (and so not computed).

    scripts/rpc-backend-ops.py TEST_BACKEND_OPS HOST:PORT SERVER_LOG [OP,OP...]

TEST_BACKEND_OPS: built with ggml's RPC client and the lines that add $KVG_RPC_ENDPOINTS
before main (scripts/check-rpc.sh builds it). SERVER_LOG: the server's stderr, where each
skipped graph leaves a line. A case whose graph the server refused reads outputs it never
wrote, so test-backend-ops reports it as failed: each failed case of an op that saw a refusal
is run again alone to tell the two apart (at most MAX_RERUNS per op, default 400; the rest
are counted as unclassified). A tensor type the server does not accept closes the connection
and ends the client: the op is run again without that type's cases, which count as refused.
Prints a markdown table; the failed cases go to stderr.
"""
import os
import re
import subprocess
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RESULT = re.compile(r"^\s*(?:\[[^\]]*\] .*?\s{2,})?([A-Z0-9_]+\(.*\)|[A-Z0-9_]+): (OK|FAIL|not supported.*)$")


def run(binary, endpoint, args):
    env = dict(os.environ, KVG_RPC_ENDPOINTS=endpoint)
    p = subprocess.run([binary] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace")
    return [ANSI.sub("", line) for line in p.stdout.splitlines()], p.returncode


def refusals(log):
    with open(log, errors="replace") as f:
        return sum(1 for line in f if "graph refused, skipped" in line)


def list_ops(binary, endpoint, only):
    """The ops that have cases, from the support mode (which computes nothing)."""
    lines, _ = run(binary, endpoint, ["support", "-b", "RPC0"] + (["-o", only] if only else []))
    ops = set()
    for line in lines:
        m = re.match(r"^\s*(([A-Z0-9_]+)\(.*\)): ", line)
        if m:
            ops.add(m.group(2))
    return ops


def results(lines):
    out = []
    for line in lines:
        m = RESULT.match(line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def type_names():
    """ggml type id -> name, from kvgraph's ggml.h (ggml's values)."""
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ggml", "include", "ggml.h")
    with open(header) as f:
        return {int(v): n.lower() for n, v in re.findall(r"GGML_TYPE_(\w+)\s*=\s*(\d+)", f.read())}


def refused_types(log, names):
    """Types whose tensors the server refused outright: it closes the connection, the client aborts."""
    with open(log, errors="replace") as f:
        ids = re.findall(r"connection closed: .*type (\d+) is not supported", f.read())
    return {names.get(int(i), i) for i in ids}


def run_op(binary, endpoint, log, op, names):
    """Runs op's cases; cases of a tensor type the server does not accept end the client, so
    they are filtered out and counted (from the support listing) as refused."""
    skipped = set()
    while True:
        params = ["-p", "^(?!.*=(%s)[,)])" % "|".join(sorted(skipped))] if skipped else []
        lines, _ = run(binary, endpoint, ["test", "-b", "RPC0", "-o", op] + params)
        if any(re.match(r"^\s*Backend RPC0.*: (OK|FAIL)", line) for line in lines):
            break
        new = refused_types(log, names) - skipped
        if not new:
            break  # stopped for another reason: what ran is reported
        skipped |= new
    n_type_refused = 0
    if skipped:
        listed, _ = run(binary, endpoint, ["support", "-b", "RPC0", "-o", op])
        pattern = re.compile(r"=(%s)[,)]" % "|".join(sorted(skipped)))
        n_type_refused = sum(1 for line in listed if re.match(r"^\s*[A-Z0-9_]+\(", line) and pattern.search(line))
    return lines, n_type_refused


def classify_op(binary, endpoint, log, op, max_reruns, names):
    before = refusals(log)
    lines, n_type_refused = run_op(binary, endpoint, log, op, names)
    seen = results(lines)
    row = {"cases": len(seen) + n_type_refused, "passed": 0, "failed": 0, "refused": n_type_refused, "cpu": 0,
           "unclassified": 0}
    failed = []
    for case, verdict in seen:
        if verdict == "OK":
            row["passed"] += 1
        elif verdict == "FAIL":
            failed.append(case)
        else:
            row["cpu"] += 1
    if refusals(log) == before:
        row["failed"] = len(failed)
        return row, failed
    really_failed = []
    for i, case in enumerate(failed):
        if i >= max_reruns:
            row["unclassified"] += len(failed) - i
            break
        mark = refusals(log)
        run(binary, endpoint, ["test", "-b", "RPC0", "-o", case])
        if refusals(log) > mark:
            row["refused"] += 1
        else:
            row["failed"] += 1
            really_failed.append(case)
    return row, really_failed


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, endpoint, log = sys.argv[1:4]
    only = sys.argv[4] if len(sys.argv) > 4 else ""
    max_reruns = int(os.environ.get("MAX_RERUNS", "400"))
    ops = list_ops(binary, endpoint, only)
    names = type_names()
    totals = dict(cases=0, passed=0, failed=0, refused=0, cpu=0, unclassified=0)
    print("| op | cases | passed | failed | refused by the server | not supported by ggml's CPU | unclassified |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for op in sorted(ops):
        row, failed = classify_op(binary, endpoint, log, op, max_reruns, names)
        n = row["cases"]
        print(f"| {op} | {n} | {row['passed']} | {row['failed']} | {row['refused']} | {row['cpu']} |"
              f" {row['unclassified']} |", flush=True)
        for case in failed:
            print(f"FAILED {case}", file=sys.stderr)
        totals["cases"] += n
        for k in ("passed", "failed", "refused", "cpu", "unclassified"):
            totals[k] += row[k]
    t = totals
    print(f"| all | {t['cases']} | {t['passed']} | {t['failed']} | {t['refused']} | {t['cpu']} | {t['unclassified']} |")


if __name__ == "__main__":
    main()
