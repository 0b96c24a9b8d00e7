#!/usr/bin/env python3
"""Turns rpc_bench.sh's result lines into markdown tables (median over rounds)."""
import statistics
import sys
from collections import defaultdict

ROWS = [
    ("direct", "-", "gRPC direct", "none"),
    ("sidecar", "-", "gRPC + nginx sidecars", "none"),
    ("sidecar", "inf", "gRPC + nginx sidecars", "limit_req, rate 10^8/s"),
    ("conduit", "none", "gRPC + libmrpc-grpc (conduitd)", "none"),
    ("conduit", "inf", "gRPC + libmrpc-grpc (conduitd)", "rate limit, infinite"),
    ("conduit", "acl", "gRPC + libmrpc-grpc (conduitd)", "ACL on a request field"),
    ("tls-direct", "-", "TLS: gRPC direct", "none"),
    ("tls-sidecar", "-", "TLS: gRPC + nginx sidecars (TLS between them)", "none"),
    ("tls-conduit", "none", "TLS: gRPC + libmrpc-grpc (conduitd)", "none"),
]


def parse(path):
    runs = defaultdict(list)  # (config, policy, workload) -> [fields]
    bulk = {}
    for line in open(path):
        words = line.split()
        if words[0] == "bulk":
            f = dict(zip(words[2::2], words[3::2]))  # bulk QOS calls N seconds S ...
            bulk[words[1]] = f
            continue
        config, policy, workload = words[:3]
        if "failed" in words:
            runs[(config, policy, workload)].append(None)
            continue
        runs[(config, policy, workload)].append(dict(zip(words[3::2], (float(x) for x in words[4::2]))))
    return runs, bulk


def median(runs, key, field):
    values = [r[field] for r in runs.get(key, []) if r is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=0):
    return "n/a" if v is None else f"{v:,.{digits}f}"


def main():
    runs, bulk = parse(sys.argv[1])
    print("| configuration | policy | median us | P99 us | RPC/s, 128 in flight | goodput 8 KiB, Gbit/s | goodput 1 MiB, Gbit/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for config, policy, name, label in ROWS:
        if not any(k[0] == config and k[1] == policy for k in runs):
            continue
        print(f"| {name} | {label} | {fmt(median(runs, (config, policy, 'lat'), 'median_us'), 1)} "
              f"| {fmt(median(runs, (config, policy, 'lat'), 'p99_us'), 1)} "
              f"| {fmt(median(runs, (config, policy, 'rate'), 'rps'))} "
              f"| {fmt(median(runs, (config, policy, '8k'), 'goodput_gbps'), 2)} "
              f"| {fmt(median(runs, (config, policy, '1m'), 'goodput_gbps'), 2)} |")
    if any(k[0] == "ab-native" for k in runs):
        print()
        print("| managed server (64 B, 1 in flight, back to back) | median us | P99 us |")
        print("| --- | ---: | ---: |")
        for config, label in (("ab-native", "with gRPC's native listener beside conduitd (default)"),
                              ("ab-only", "without it (CONDUIT_RPC_NATIVE_LISTENER=0)")):
            print(f"| {label} | {fmt(median(runs, (config, 'none', 'lat'), 'median_us'), 1)} "
                  f"| {fmt(median(runs, (config, 'none', 'lat'), 'p99_us'), 1)} |")
    d = median(runs, ("direct", "-", "lat"), "median_us")
    s = median(runs, ("sidecar", "-", "lat"), "median_us")
    c = median(runs, ("conduit", "none", "lat"), "median_us")
    td = median(runs, ("tls-direct", "-", "lat"), "median_us")
    ts = median(runs, ("tls-sidecar", "-", "lat"), "median_us")
    tc = median(runs, ("tls-conduit", "none", "lat"), "median_us")
    print()
    if td and tc:
        print(f"- TLS: median latency, conduit / direct gRPC: {tc / td:.2f}; sidecars / conduit: "
              f"{(ts / tc) if ts else float('nan'):.2f}x")
    if d and c:
        print(f"- median latency, conduit / direct gRPC: {c / d:.2f} (target <= 1)")
    if s and c:
        print(f"- median latency, sidecars / conduit: {s / c:.2f}x (target >= 3x)")
    for w, field, what in (("rate", "rps", "RPC/s"), ("8k", "goodput_gbps", "8 KiB goodput"),
                           ("1m", "goodput_gbps", "1 MiB goodput")):
        base = median(runs, ("conduit", "none", w), field)
        acl = median(runs, ("conduit", "acl", w), field)
        if base and acl:
            print(f"- {what}, ACL vs no policy: {100 * (acl - base) / base:+.1f}% (target: loss < 10%)")
    if bulk:
        print()
        print("| QoS (small RPCs first) | small RPC median us | small RPC P99 us | bulk 1 MiB goodput, Gbit/s |")
        print("| --- | ---: | ---: | ---: |")
        for qos in ("off", "on"):
            b = bulk.get(qos, {})
            print(f"| {qos} | {fmt(median(runs, ('qos', qos, 'lat'), 'median_us'), 1)} "
                  f"| {fmt(median(runs, ('qos', qos, 'lat'), 'p99_us'), 1)} | {b.get('goodput_gbps', 'n/a')} |")


if __name__ == "__main__":
    main()
