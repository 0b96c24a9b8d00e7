#!/usr/bin/python3
"""Side-by-side markdown table from the result files allreduce_bench.sh collects.

Each RESULTS/<hosts>.<impl> file holds lines "size count time_us algbw busbw wrong"
(impl: ours, gloo, mpi); RESULTS/<hosts>.link holds iperf3 Gbit/s over one link,
RESULTS/<hosts>.ring the Gbit/s of every host sending to the next at once; RESULTS/<hosts>.copies
lines "size ratio": bytes host 0's conduitd counted written to memory per payload byte
(docs/design.md, "Copies per payload byte"). A missing file or size shows as "-" so a
skipped or failed implementation is visible.
"""
import argparse
import os


def load(path, busbw_factor):
    """size -> (time_us, busbw GB/s, wrong). busbw is recomputed from size and time with
    the same factor for every implementation: the tools print it rounded to 2 decimals,
    which is too coarse to compare implementations within a few percent."""
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 6 or line.startswith("#"):
                continue
            size, time_us = int(p[0]), float(p[2])
            busbw = size / time_us / 1e3 * busbw_factor if time_us > 0 else 0.0
            rows[size] = (time_us, busbw, int(float(p[5])))
    return rows


def human(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def cell(row):
    if row is None:
        return "-"
    t, bw, wrong = row
    flag = f" ({wrong} wrong!)" if wrong else ""
    return f"{t:.0f} / {bw:.3f}{flag}"


def bytes_across_hosts(coll, size, hosts, ppn):
    """What must cross some link between hosts, in all, whatever the algorithm: every host
    must receive the (n-1)/n of an all-gather's output it lacks, send the (n-1)/n of a
    reduce-scatter's input others own, receive a broadcast once (all but the root), and an
    all-reduce is both (2(n-1)/n per host). An all-to-all's ranks each send the (n-1)/n of
    their buffer meant for other hosts' ranks."""
    if coll == "alltoall":
        return ppn * (hosts - 1) * size
    return (2 if coll == "allreduce" else 1) * (hosts - 1) * size


def read_gbit(path):
    """A rate file's Gbit/s, 0 when the run did not measure it."""
    return float(open(path).read()) if os.path.exists(path) else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--ppn", default="1")
    ap.add_argument("--rate", default="", help="the links, as the title says them: \"links 1gbit\"")
    ap.add_argument("--title", default="allreduce")
    ap.add_argument("--coll", default="allreduce")
    ap.add_argument("--out")
    a = ap.parse_args()

    lines = [f"## {a.title}: time (us) / busbw (GB/s), {a.ppn} rank(s) per host, {a.rate}", ""]
    for h in a.hosts.split():
        base = os.path.join(a.results, h)
        link = read_gbit(base + ".link")
        link_gbs = link / 8  # iperf3 Gbit/s -> GB/s, the unit of busbw
        ring = read_gbit(base + ".ring")
        bidir = ""
        if os.path.exists(base + ".link-bidir"):
            bidir = f", bidirectional {read_gbit(base + '.link-bidir'):.3f} Gbit/s per direction"
        nranks = int(h) * int(a.ppn)
        # nccl-tests' bus bandwidth factors
        factor = {"allreduce": 2 * (nranks - 1) / nranks, "broadcast": 1.0, "reduce": 1.0}.get(a.coll,
                                                                                          (nranks - 1) / nranks)
        res = {k: load(f"{base}.{k}", factor) for k in ("ours", "gloo", "mpi")}
        copies = {}
        if os.path.exists(base + ".copies"):
            for line in open(base + ".copies"):
                p = line.split()
                if len(p) == 2:
                    copies[int(p[0])] = float(p[1])
        ring_note = f"; all links at once {ring:.3f} Gbit/s in all" if ring > 0 else ""
        lines.append(f"### {h} hosts: iperf3 link {link:.3f} Gbit/s = {link_gbs:.4f} GB/s{bidir}{ring_note}")
        if not res["ours"]:
            lines.append("(ours: no results; conduitd/conduit-perf missing or failed)")
        lines.append("")
        # "all-links time": the bytes that must cross links, at the rate all links carry
        # at once (on one machine the namespaces share its CPUs): about the best any algorithm
        # does; for a broadcast or a reduce at least the time of the whole buffer over one
        # link (the root's), whichever is longer.
        lines.append("| size | ours | gloo | mpi | ours/best peer | ours/link | all-links time | ours B/B |")
        lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size in sorted(set().union(*[r.keys() for r in res.values()])):
            o, g, m = (res[k].get(size) for k in ("ours", "gloo", "mpi"))
            peers = [r[1] for r in (g, m) if r is not None]
            # busbw ratio (= best peer's time / our time): > 1 means we are faster.
            ratio = f"{o[1] / max(peers):.2f}" if o and peers and max(peers) > 0 else "-"
            vs_link = f"{o[1] / link_gbs:.2f}" if o and link_gbs > 0 else "-"
            per_byte = f"{copies[size]:.2f}" if size in copies else "-"
            bound_s = bytes_across_hosts(a.coll, size, int(h), int(a.ppn)) / (ring * 1e9 / 8) if ring > 0 else 0
            if a.coll in ("broadcast", "reduce") and link > 0:
                bound_s = max(bound_s, size / (link * 1e9 / 8))
            all_links = f"{bound_s * 1e6:.0f}" if ring > 0 else "-"
            lines.append(f"| {human(size)} | {cell(o)} | {cell(g)} | {cell(m)} | {ratio} | {vs_link} | {all_links} | "
                         f"{per_byte} |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
