#!/usr/bin/env python3
"""CPU time per call by category, in us, from `perf record -a` files (cpu_profile.sh).

usage: cpu_profile_table.py --cpus N LABEL=FILE.data:US_PER_CALL ...

Each sample of a whole-machine recording is a slice of one CPU's time, so a call made while
it ran cost the machine CPUs x its time per call, and a category's share of the samples is
its share of that. The categories are the ones the profiles in
docs/benchmarks.md found to matter; everything else lands in "other kernel" or "other
user".
"""
import argparse
import re
import subprocess
import sys


def is_copy(symbol):
    """A user-space copy routine: libc's, or StreamCopy, the non-temporal output copy
    (common/stream_copy.h)."""
    return "memmove" in symbol or "memcpy" in symbol or "StreamCopy" in symbol


# (category, test on (comm, dso, kind, symbol)), first match wins.
CATEGORIES = [
    ("idle", lambda c, d, k, s: c == "swapper"),
    ("socket send copy", lambda c, d, k, s: s == "_copy_from_iter"),
    ("socket receive copy", lambda c, d, k, s: s == "_copy_to_iter"),
    ("wake-ups (irqrestore)", lambda c, d, k, s: s == "_raw_spin_unlock_irqrestore"),
    ("context switches, yields", lambda c, d, k, s: k == "k" and (s.startswith("finish_task_switch")
                                                                  or s in ("__schedule", "do_sched_yield"))),
    ("programs' staging copies", lambda c, d, k, s: c == "conduit-perf" and is_copy(s)),
    ("user-space copies", lambda c, d, k, s: k == "." and is_copy(s)),
    ("reduction", lambda c, d, k, s: "Combine" in s or "mca_op" in d),
    ("other kernel", lambda c, d, k, s: k == "k"),
    ("other user", lambda c, d, k, s: True),
]
LINE = re.compile(r"\s*([\d.]+)%\s+(\S+)\s+(\S+)\s+\[(.)\]\s+(.*)")


def shares(data):
    out = subprocess.run(["perf", "report", "-i", data, "--sort", "comm,dso,sym", "--stdio"],
                         capture_output=True, text=True, check=True).stdout
    got = {name: 0.0 for name, _ in CATEGORIES}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        pct, comm, dso, kind, sym = float(m[1]), m[2], m[3], m[4], m[5].strip()
        for name, test in CATEGORIES:
            if test(comm, dso, kind, sym):
                got[name] += pct
                break
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpus", type=int, required=True)
    ap.add_argument("runs", nargs="+", help="LABEL=FILE.data:US_PER_CALL")
    args = ap.parse_args()
    columns = []
    for run in args.runs:
        label, _, rest = run.partition("=")
        data, _, us = rest.rpartition(":")
        if not label or not data or not us:
            sys.exit("cpu_profile_table.py: expected LABEL=FILE.data:US_PER_CALL, got %r" % run)
        per_call = args.cpus * float(us)  # us of machine time per call
        columns.append((label, float(us), per_call, shares(data)))
    print("| us of CPU per call | " + " | ".join(c[0] for c in columns) + " |")
    print("| --- |" + " ---: |" * len(columns))
    print("| time per call (us) | " + " | ".join("%.0f" % c[1] for c in columns) + " |")
    for name, _ in CATEGORIES:
        cells = ["%.0f" % (c[3][name] / 100 * c[2]) for c in columns]
        print("| %s | %s |" % (name, " | ".join(cells)))
    busy = ["**%.0f**" % ((100 - c[3]["idle"]) / 100 * c[2]) for c in columns]
    print("| **busy** | %s |" % " | ".join(busy))


if __name__ == "__main__":
    main()
