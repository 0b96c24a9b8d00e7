#!/usr/bin/python3
"""Side-by-side table of objects_bench.sh results (markdown), with lower bounds.

Reads RESULTS/<hosts>.link (iperf3 Gbit/s, one link), RESULTS/<hosts>.ring (iperf3 Gbit/s,
every host sending to the next at once) and RESULTS/<hosts>.<system> lines
"op hosts size_bytes iters median_ms min_ms"."""
import argparse
import os

from bench_table import read_gbit

NAMES = {"hoplite": "Conduit (libhoplite)", "mpi": "OpenMPI", "gloo": "Gloo", "ray": "Ray"}


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%g %s" % (n / div, unit)
    return "%d B" % n


def transfer_ms(nbytes, gbit):
    """How long nbytes take at gbit Gbit/s."""
    return nbytes / (gbit * 1e9 / 8) * 1e3


def lower_bound_ms(op, hosts, size, gbit):
    factor = {"bcast": 1.0, "gather": hosts - 1.0, "reduce": 1.0, "allreduce": 2.0 * (hosts - 1) / hosts}[op]
    return transfer_ms(factor * size, gbit)


def all_links_time_ms(op, hosts, size, gbit):
    """The bytes that must cross some link, at the rate all links carry at once: every host
    but the source (bcast) or the destination (gather, reduce) sends or receives the object
    once; an allreduce is a reduce and a broadcast."""
    return transfer_ms((2 if op == "allreduce" else 1) * (hosts - 1) * size, gbit)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--ops", required=True)
    ap.add_argument("--systems", required=True)
    ap.add_argument("--rate", required=True)
    ap.add_argument("--shmem-thp", default="", help="transparent_hugepage/shmem_enabled during the run")
    ap.add_argument("--gap-ms", type=int, help="idle time before each run, the same for every system")
    ap.add_argument("--out")
    a = ap.parse_args()
    systems = a.systems.split()
    peers = [s for s in systems if s != "hoplite"]
    lines = []
    for hosts in a.hosts.split():
        gbit = read_gbit(os.path.join(a.results, "%s.link" % hosts))
        ring_gbit = read_gbit(os.path.join(a.results, "%s.ring" % hosts))
        data = {}
        for s in systems:
            path = os.path.join(a.results, "%s.%s" % (hosts, s))
            if not os.path.exists(path):
                continue
            for row in open(path):
                f = row.split()
                if len(f) == 6:
                    data[(s, f[0], int(f[2]))] = float(f[4])
        thp = ", shared memory huge pages: %s" % a.shmem_thp if a.shmem_thp else ""
        if a.gap_ms is not None:
            thp += ", %d ms idle before each run" % a.gap_ms
        lines.append("### %s hosts, links shaped to %s (iperf3: %.3f Gbit/s, all links at once %.3f in all%s)\n" %
                     (hosts, a.rate, gbit, ring_gbit, thp))
        head = (["op", "size", "lower bound", "all-links time"] + [NAMES.get(s, s) for s in systems] +
                ["ours / bound", "ours / all-links time", "ours / best peer"])
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + " --- |" * len(head))
        for op in a.ops.split():
            sizes = sorted({k[2] for k in data if k[1] == op})
            for size in sizes:
                lb = lower_bound_ms(op, int(hosts), size, gbit) if gbit else 0
                all_links = all_links_time_ms(op, int(hosts), size, ring_gbit) if ring_gbit else 0
                row = [op, human(size), "%.2f ms" % lb, "%.2f ms" % all_links if all_links else "n/a"]
                for s in systems:
                    v = data.get((s, op, size))
                    row.append("%.2f ms" % v if v is not None else "n/a")
                ours = data.get(("hoplite", op, size))
                best = min([data[(p, op, size)] for p in peers if (p, op, size) in data], default=None)
                row.append("%.2fx" % (ours / lb) if ours and lb else "n/a")
                row.append("%.2fx" % (ours / all_links) if ours and all_links else "n/a")
                row.append("%.2fx" % (ours / best) if ours and best else "n/a")
                lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
