#!/usr/bin/env python3
"""Turns auth_overhead.sh's result lines into markdown tables (median over rounds)."""
import statistics
import sys
from collections import defaultdict


def human(size):
    size = int(size)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return f"{size // div} {unit}"
    return f"{size} B"


def main():
    path, rate = sys.argv[1], sys.argv[2]
    allreduce = defaultdict(list)  # (hosts, mode, size) -> [us]
    wrong = 0
    rpc = defaultdict(list)  # (mode, workload) -> [fields]
    for line in open(path):
        w = line.split()
        if w[0] == "allreduce":
            hosts, mode, size, us, bad = w[1], w[2], int(w[3]), float(w[4]), w[5]
            allreduce[(hosts, mode, size)].append(us)
            wrong += bad != "0"
        elif w[0] == "rpc":
            mode, workload = w[2], w[3]
            rpc[(mode, workload)].append(None if "failed" in w else dict(zip(w[4::2], (float(x) for x in w[5::2]))))
    med = lambda v: statistics.median(v) if v else None
    for hosts in sorted({k[0] for k in allreduce}, key=int):
        print(f"All-reduce, {hosts} hosts, links {rate} (median over rounds of each mode's time per call)")
        print()
        print("| size | --insecure-peers, us | cluster key, us | key / insecure |")
        print("| ---: | ---: | ---: | ---: |")
        for size in sorted({k[2] for k in allreduce if k[0] == hosts}):
            a, b = med(allreduce[(hosts, "insecure", size)]), med(allreduce[(hosts, "key", size)])
            ratio = f"{b / a:.3f}" if a and b else "n/a"
            print(f"| {human(size)} | {a:,.1f} | {b:,.1f} | {ratio} |")
        print()
    if wrong:
        print(f"**{wrong} runs reported wrong results**")
        print()
    if rpc:
        print(f"RPC, 2 hosts, links {rate}, gRPC under LD_PRELOAD=libmrpc-grpc.so, no policy (median over rounds)")
        print()
        print("| daemon connections | median us | P99 us | RPC/s, 128 in flight | 8 KiB goodput, Gbit/s | 1 MiB goodput, Gbit/s |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        names = {"insecure": "--insecure-peers", "key": "cluster key", "encrypt": "cluster key + --encrypt-peers"}

        def get(mode, workload, field):
            vals = [r[field] for r in rpc.get((mode, workload), []) if r is not None and field in r]
            return med(vals)

        def f(v, d):
            return "n/a" if v is None else f"{v:,.{d}f}"

        for mode in ("insecure", "key", "encrypt"):
            if not any(k[0] == mode for k in rpc):
                continue
            print(f"| {names[mode]} | {f(get(mode, 'lat', 'median_us'), 1)} | {f(get(mode, 'lat', 'p99_us'), 1)} "
                  f"| {f(get(mode, 'rate', 'rps'), 0)} | {f(get(mode, '8k', 'goodput_gbps'), 2)} "
                  f"| {f(get(mode, '1m', 'goodput_gbps'), 2)} |")
        print()
        base = get("insecure", "lat", "median_us")
        for mode in ("key", "encrypt"):
            m = get(mode, "lat", "median_us")
            if base and m:
                print(f"- {names[mode]}: median latency {m - base:+.1f} us per call vs --insecure-peers")


if __name__ == "__main__":
    main()
