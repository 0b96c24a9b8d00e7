#!/usr/bin/env python3
"""Turns auth_overhead.sh's result lines into markdown tables.

Each round ran every mode once, in alternating order; a mode is compared with
--insecure-peers within its round (paired), and the tables give the median over rounds
of each mode's figure and of the per-round ratio or difference, with the spread of the
latter."""
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
    allreduce = {}  # (hosts, mode, size, round) -> us
    wrong = 0
    rpc = {}  # (round, mode, workload) -> fields
    for line in open(path):
        w = line.split()
        if w[0] == "allreduce":
            hosts, mode, size, us, bad, rnd = w[1], w[2], int(w[3]), float(w[4]), w[5], w[6]
            allreduce[(hosts, mode, size, rnd)] = us
            wrong += bad != "0"
        elif w[0] == "rpc" and "failed" not in w:
            rpc[(w[1], w[2], w[3])] = dict(zip(w[4::2], (float(x) for x in w[5::2])))
    med = statistics.median
    for hosts in sorted({k[0] for k in allreduce}, key=int):
        rounds = sorted({k[3] for k in allreduce if k[0] == hosts})
        print(f"All-reduce, {hosts} hosts, links {rate}, {len(rounds)} rounds")
        print()
        print("| size | --insecure-peers, us | cluster key, us | key / insecure (median of rounds) | spread |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for size in sorted({k[2] for k in allreduce if k[0] == hosts}):
            a = [allreduce.get((hosts, "insecure", size, r)) for r in rounds]
            b = [allreduce.get((hosts, "key", size, r)) for r in rounds]
            ratios = [y / x for x, y in zip(a, b) if x and y]
            print(f"| {human(size)} | {med([x for x in a if x]):,.1f} | {med([y for y in b if y]):,.1f} "
                  f"| {med(ratios):.3f} | {min(ratios):.2f}-{max(ratios):.2f} |")
        print()
    if wrong:
        print(f"**{wrong} runs reported wrong results**")
        print()
    if not rpc:
        return
    rounds = sorted({k[0] for k in rpc})
    names = {"insecure": "--insecure-peers", "key": "cluster key", "encrypt": "cluster key + --encrypt-peers"}
    print(f"RPC, 2 hosts, links {rate}, gRPC under LD_PRELOAD=libmrpc-grpc.so, no policy, {len(rounds)} rounds")
    print()
    print("| daemon connections | median us | P99 us | RPC/s, 128 in flight | 8 KiB goodput, Gbit/s | 1 MiB goodput, Gbit/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")

    def col(mode, workload, field):
        v = [rpc[(r, mode, workload)][field] for r in rounds if (r, mode, workload) in rpc]
        return med(v) if v else None

    def f(v, d):
        return "n/a" if v is None else f"{v:,.{d}f}"

    for mode in ("insecure", "key", "encrypt"):
        print(f"| {names[mode]} | {f(col(mode, 'lat', 'median_us'), 1)} | {f(col(mode, 'lat', 'p99_us'), 1)} "
              f"| {f(col(mode, 'rate', 'rps'), 0)} | {f(col(mode, '8k', 'goodput_gbps'), 2)} "
              f"| {f(col(mode, '1m', 'goodput_gbps'), 2)} |")
    print()
    for mode in ("key", "encrypt"):
        diffs = [rpc[(r, mode, "lat")]["median_us"] - rpc[(r, "insecure", "lat")]["median_us"] for r in rounds
                 if (r, mode, "lat") in rpc and (r, "insecure", "lat") in rpc]
        gp = [rpc[(r, mode, "1m")]["goodput_gbps"] / rpc[(r, "insecure", "1m")]["goodput_gbps"] for r in rounds
              if (r, mode, "1m") in rpc and (r, "insecure", "1m") in rpc]
        if diffs:
            print(f"- {names[mode]} vs --insecure-peers, same round: median latency {med(diffs):+.1f} us per call "
                  f"(rounds {min(diffs):+.1f} to {max(diffs):+.1f}); 1 MiB goodput x{med(gp):.2f}")


if __name__ == "__main__":
    main()
