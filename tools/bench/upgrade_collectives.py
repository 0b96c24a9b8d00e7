#!/usr/bin/env python3
"""What a multi-host NCCL job sees while its daemons are replaced: collective latency over time.

Hosts are network namespaces (tools/netns/conduit-netns), one conduitd each (cluster key).
A job of one rank per host runs through Conduit's libnccl.so.2 (ctypes; this script is also
each rank: --rank), all-reducing --count floats in a loop and checking every sum, each rank
logging when each call started, how long it took and whether it was right. Meanwhile the
daemons are replaced one after the other by `conduitctl upgrade` (--rounds times each);
then one daemon is stopped and restarted (SIGTERM, start again: `systemctl restart`), which
ends the job's communicator on every host. Beside the job, a gRPC pair under
LD_PRELOAD=libmrpc-grpc.so (tests/rpc's greeter programs): the server on the last host, the
client on host 0 opening bidirectional streams one after another (4 messages each, every
reply checked), and a second client on host 0 keeping one stream open for the whole run, a
message every 2 ms (opened again if it breaks). Printed: the calls' median and 99th percentile when nothing happens (rank 0);
per event the calls that started in it, failed, and the slowest; the same for the gRPC
streams; and rank 0's calls and the streams over time around the first upgrade and around
the upgrade of the server's host (slowest call per 10 ms).

usage: upgrade_collectives.py [--build build] [--hosts 4] [--rounds 1] [--count 65536]
                              [--rate RATE] [--gap-s 1.0]
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from upgrade_bench import daemon_pid, quiet_calls, read_streams, slowest_per_slot

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NETNS = os.path.join(ROOT, "tools", "netns", "conduit-netns")
PREFIX, SUBNET, PORT = "ubn", "10.78.0", 7650
NCCL_FLOAT32, NCCL_SUM = 7, 0


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def rank_main(args):
    """One rank: all-reduces until the stop file appears or its communicator fails."""
    lib = ctypes.CDLL(os.path.join(args.build, "lib", "libnccl.so.2"))
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_void_p, ctypes.c_void_p]
    uid = UniqueId()
    id_file = os.path.join(args.work, "job.id")
    if args.rank == 0:
        if lib.ncclGetUniqueId(ctypes.byref(uid)) != 0:
            sys.exit("ncclGetUniqueId failed")
        with open(id_file + ".tmp", "wb") as f:
            f.write(ctypes.string_at(ctypes.addressof(uid), 128))
        os.rename(id_file + ".tmp", id_file)
    else:
        until = time.monotonic() + 30
        while not os.path.exists(id_file):
            if time.monotonic() > until:
                sys.exit("no unique id")
            time.sleep(0.01)
        with open(id_file, "rb") as f:
            ctypes.memmove(ctypes.byref(uid), f.read(128), 128)
    comm = ctypes.c_void_p()
    lib.ncclGetLastError.restype = ctypes.c_char_p
    lib.ncclGetLastError.argtypes = [ctypes.c_void_p]
    if lib.ncclCommInitRank(ctypes.byref(comm), args.nranks, uid, args.rank) != 0:
        sys.exit(f"rank {args.rank}: ncclCommInitRank failed: {lib.ncclGetLastError(None).decode()}")
    n = args.count
    send, recv = (ctypes.c_float * n)(), (ctypes.c_float * n)()
    probe = (0, n // 2, n - 1)
    stop = os.path.join(args.work, "stop")
    samples = []
    step = 0
    while not os.path.exists(stop):
        k = float(step % 5)
        for i in probe:
            send[i] = args.rank + 1 + k
        t0 = time.monotonic()
        ok = lib.ncclAllReduce(send, recv, n, NCCL_FLOAT32, NCCL_SUM, comm, None) == 0
        d = time.monotonic() - t0
        # Sum over ranks r of (r + 1 + k).
        want = args.nranks * (args.nranks + 1) / 2 + args.nranks * k
        ok = ok and all(recv[i] == want for i in probe)
        samples.append((t0, d, ok))
        step += 1
        if not ok:
            break  # a failed communicator stays failed: the job would restart
    with open(os.path.join(args.work, f"rank{args.rank}.json"), "w") as f:
        json.dump(samples, f)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--count", type=int, default=64 * 1024)
    ap.add_argument("--rate", default="")
    ap.add_argument("--gap-s", type=float, default=1.0)
    ap.add_argument("--rank", type=int, default=-1)
    ap.add_argument("--nranks", type=int, default=0)
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.rank >= 0:
        return rank_main(args)

    work = tempfile.mkdtemp(prefix="upgrade-coll.")
    conduitd, conduitctl = os.path.join(args.build, "bin", "conduitd"), os.path.join(args.build, "bin", "conduitctl")
    up = [NETNS, "up", "--hosts", str(args.hosts), "--prefix", PREFIX, "--subnet", SUBNET]
    if args.rate:
        up += ["--rate", args.rate]
    run(up, stdout=subprocess.DEVNULL)
    key = os.path.join(work, "cluster.key")
    with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(os.urandom(32).hex())
    logs = [open(os.path.join(work, f"conduitd-h{h}.log"), "a") for h in range(args.hosts)]
    ips = [f"{SUBNET}.{h + 1}" for h in range(args.hosts)]

    def ns(h):
        return f"{PREFIX}-h{h}"

    def start(h):
        cmd = ["ip", "netns", "exec", ns(h), conduitd, "--socket", os.path.join(work, f"h{h}.sock"), "--listen",
               f"{ips[h]}:{PORT}", "--advertise", ips[h], "--cluster-key", key, "--log-level", "warn"]
        subprocess.Popen(cmd, stdout=logs[h], stderr=logs[h], start_new_session=True)
        admin = os.path.join(work, f"h{h}-admin.sock")
        until = time.monotonic() + 20
        while time.monotonic() < until:
            try:
                return daemon_pid(admin)
            except (OSError, ValueError, KeyError):
                time.sleep(0.01)
        sys.exit(f"conduitd on host {h} did not start; see {logs[h].name}")

    ranks = []
    events = []  # (kind, host, start, end)
    grpc = []
    grpc_out = open(os.path.join(work, "greeter_client.out"), "w+")
    stream_out = open(os.path.join(work, "greeter_stream.out"), "w+")
    try:
        for h in range(args.hosts):
            start(h)
        # The gRPC pair: server on the last host, client on host 0, for the whole schedule.
        tests = os.path.join(args.build, "tests", "bin")
        server_host = args.hosts - 1
        seconds = args.gap_s * (args.rounds * args.hosts + 3) + args.rounds * args.hosts + 3
        preload = os.path.join(args.build, "lib", "libmrpc-grpc.so")
        for h, argv, out in ((server_host, [os.path.join(tests, "greeter_server"), "--listen", "0.0.0.0:50091",
                                            "--mode", "sync"], subprocess.DEVNULL),
                             (0, [os.path.join(tests, "greeter_client"), "--target", f"{ips[server_host]}:50091",
                                  "--case", "chat_loop", "--count", "4", "--bytes", "3000", "--print-each", "1",
                                  "--seconds", str(int(seconds))], grpc_out),
                             (0, [os.path.join(tests, "greeter_client"), "--target", f"{ips[server_host]}:50091",
                                  "--case", "stream_loop", "--interval-ms", "2", "--bytes", "3000", "--print-each",
                                  "1", "--seconds", str(int(seconds))], stream_out)):
            env = dict(os.environ, LD_PRELOAD=preload, CONDUIT_SOCKET=os.path.join(work, f"h{h}.sock"),
                       CONDUIT_LOG_LEVEL="error")
            grpc.append(subprocess.Popen(["ip", "netns", "exec", ns(h)] + argv, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True))
            time.sleep(0.5)
        for r in range(args.hosts):
            env = dict(os.environ, CONDUIT_SOCKET=os.path.join(work, f"h{r}.sock"), CONDUIT_LOG_LEVEL="error")
            ranks.append(subprocess.Popen(
                ["ip", "netns", "exec", ns(r), sys.executable, os.path.abspath(__file__), "--build", args.build,
                 "--rank", str(r), "--nranks", str(args.hosts), "--count", str(args.count), "--work", work],
                env=env))
        time.sleep(args.gap_s + 1)
        for _ in range(args.rounds):
            for h in range(args.hosts):
                admin = os.path.join(work, f"h{h}-admin.sock")
                t0 = time.monotonic()
                r = subprocess.run([conduitctl, "--socket", admin, "upgrade"], capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"upgrade of host {h} failed: {r.stderr}")
                events.append(("live upgrade", h, t0, time.monotonic()))
                time.sleep(args.gap_s)
        # Stop and restart the last host's daemon: the job's communicator ends everywhere.
        h = args.hosts - 1
        pid = daemon_pid(os.path.join(work, f"h{h}-admin.sock"))
        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        while os.path.exists(f"/proc/{pid}"):
            time.sleep(0.001)
        start(h)
        events.append(("stop and restart", h, t0, time.monotonic()))
        time.sleep(args.gap_s)
    finally:
        open(os.path.join(work, "stop"), "w").close()
        for client in grpc[1:]:  # the clients end on their own (--seconds)
            try:
                client.wait(timeout=120)
            except subprocess.TimeoutExpired:
                client.kill()
        for p in grpc:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in ranks:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["pkill", "-f", "--", f"--socket {work}/"], check=False)
        time.sleep(0.5)
        run([NETNS, "down", "--prefix", PREFIX], stdout=subprocess.DEVNULL)

    samples = []
    for r in range(args.hosts):
        with open(os.path.join(work, f"rank{r}.json")) as f:
            samples.append([tuple(s) for s in json.load(f)])
    quiet = quiet_calls(samples[0], [(s, e) for (_, _, s, e) in events])
    median = statistics.median(quiet) * 1e3 if quiet else float("nan")
    p99 = sorted(quiet)[int(0.99 * (len(quiet) - 1))] * 1e3 if quiet else float("nan")
    link = f"links shaped to {args.rate}" if args.rate else "unshaped veth links"
    print(f"# {args.hosts} hosts ({link}), one rank each, all-reduce of {args.count} floats in a loop, "
          f"every sum checked; each daemon replaced live {args.rounds} time(s) in turn, then host {args.hosts - 1} "
          f"stopped and restarted")
    print()
    print("| event | host | rank 0's calls in the window | failed (all ranks) | slowest call, any rank (ms) "
          "| median call, quiet (ms) | p99 call, quiet (ms) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, (kind, h, s, e) in enumerate(events):
        # A job whose communicator failed has no later calls: an event's failures are those
        # until the next event.
        nxt = events[i + 1][2] - 0.05 if i + 1 < len(events) else float("inf")
        window = [(t, d, ok) for rank in samples for (t, d, ok) in rank if s - 0.05 <= t <= e + 0.05]
        mine = [1 for (t, d, ok) in samples[0] if s - 0.05 <= t <= e + 0.05]
        failed = sum(1 for rank in samples for (t, d, ok) in rank if not ok and s - 0.05 <= t < nxt)
        slowest = max((d for (t, d, ok) in window), default=0.0) * 1e3
        print(f"| {kind} | {h} | {len(mine)} | {failed} | {slowest:.1f} | {median:.3f} | {p99:.1f} |")
    print()
    last = [(t, ok) for rank in samples for (t, d, ok) in rank[-1:]]
    if any(not ok for _, ok in last):
        first = min(t + d for rank in samples for (t, d, ok) in rank if not ok)
        print(f"After the stop-and-restart: {sum(1 for _, ok in last if not ok)} of {len(last)} ranks' last call "
              f"failed, the first ending {(first - events[-1][2]) * 1e3:.0f} ms after SIGTERM; the job must be restarted "
              "(a new communicator on every host, from its last checkpoint).")
    kind, h, s, e = events[0]
    print(f"rank 0, first live upgrade (host {h}): slowest all-reduce (ms) per 10 ms from 20 ms before it: "
          + " ".join(slowest_per_slot(samples[0], s - 0.02)))
    # The gRPC clients (on host 0, the server on the last host): streams one after another,
    # and one long stream's messages.
    for out, what, name in ((grpc_out, "chat", "gRPC streams"), (stream_out, "msg", "gRPC one long stream's messages")):
        out.seek(0)
        samples_g, summary = read_streams(out.read(), what)
        quiet = quiet_calls(samples_g, [(s, e) for (_, _, s, e) in events])
        print()
        print(f"{name}, host 0 -> host {args.hosts - 1} ({summary}): median {statistics.median(quiet) * 1e3:.3f} ms, "
              f"p99 {sorted(quiet)[int(0.99 * (len(quiet) - 1))] * 1e3:.1f} ms when nothing happens" if quiet else
              f"{name}: none ran ({summary})")
        print()
        print(f"| event | host | {name} in the window | failed | slowest (ms) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for i, (kind, h, s, e) in enumerate(events):
            nxt = events[i + 1][2] - 0.05 if i + 1 < len(events) else float("inf")
            window = [(t, d, ok) for (t, d, ok) in samples_g if s - 0.05 <= t <= e + 0.05]
            failed = sum(1 for (t, d, ok) in samples_g if not ok and s - 0.05 <= t < nxt)
            print(f"| {kind} | {h} | {len(window)} | {failed} | "
                  f"{max((d for (t, d, ok) in window), default=0.0) * 1e3:.1f} |")
        for kind, h, s, e in events:
            if kind == "live upgrade" and h in (0, args.hosts - 1):
                print(f"{name}, live upgrade of host {h}: slowest (ms) per 10 ms from 20 ms before it: "
                      + " ".join(slowest_per_slot(samples_g, s - 0.02)))
    print(f"(logs: {work})")
    if os.environ.get("UPGRADE_BENCH_KEEP") is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
