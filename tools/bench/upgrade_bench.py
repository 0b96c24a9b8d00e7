#!/usr/bin/env python3
"""What callers of conduitd see while it is replaced: a live upgrade against stop-and-restart.

One conduitd on this host (no namespaces: the sockets are what is measured). Three prober
threads call it for the whole run, each starting a call every --interval-ms (a crowd of
programs, not a connection storm that would only measure the accept loop's speed): one
connects to the program socket and hangs up; one sends GET /v1/status on the admin socket
and reads the answer (a new connection each time); and one is an object-store program
(libhoplite through its C API) that stays connected and Gets a 256 KiB object it Put at
the start, reconnecting and Putting it again when the daemon lost it, as a program must;
and one is an NCCL job (two ranks, threads of one process, through Conduit's libnccl.so.2)
that all-reduces 64 KiB of floats and checks the sums, making a new communicator when
its old one failed, as a job restarting from its last step must; and a gRPC pair under the
preload (tests/rpc's greeter_server and greeter_client, unmodified gRPC programs): the client
opens bidirectional streams one after another, 4 messages each, every reply checked; and
another pair whose client keeps one stream open for the whole run, a message every
--interval-ms (opened again when it breaks, as a program must).
Meanwhile the daemon is replaced --rounds times by `conduitctl upgrade`, then --rounds
times by stop-and-restart (SIGTERM, wait for the exit, start the same command line: what
`systemctl restart` does). For each event it prints how many calls failed, how long
callers could not get through (first to last failure), and the slowest call around it,
and when it got through again, next to the calls' median when nothing happens; then, for
the object program and the NCCL job, their calls over time around the first event of each
kind.

usage: upgrade_bench.py [--build build] [--rounds 3] [--gap-s 1.0] [--interval-ms 1]
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def admin_get(path, target="/v1/status"):
    """One GET on the admin socket (a new connection): (HTTP status, body)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(path)
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: conduitd\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0, body


def admin_status(path):
    return admin_get(path)[0] == 200


class ObjectProgram:
    """A libhoplite program (C API, ctypes) that keeps one connection and Gets one object."""

    SIZE = 256 * 1024
    OBJECT = b"upgrade-bench-object"

    def __init__(self, library):
        import ctypes
        self.c = ctypes
        self.lib = ctypes.CDLL(library)
        self.alloc_t = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
        self.lib.hoplite_connect.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                                             ctypes.c_size_t]
        self.lib.hoplite_close.argtypes = [ctypes.c_void_p]
        self.lib.hoplite_put.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p,
                                         ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.hoplite_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
                                         self.alloc_t, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        self.buf = ctypes.create_string_buffer(self.SIZE)
        self.data = bytes(range(256)) * (self.SIZE // 256)
        self.alloc = self.alloc_t(lambda ctx, size: ctypes.addressof(self.buf) if size <= self.SIZE else None)
        self.handle = None
        self.path = None

    def _connect(self):
        h = self.c.c_void_p()
        err = self.c.create_string_buffer(512)
        if self.lib.hoplite_connect(self.path.encode(), self.c.byref(h), err, 512) != 0:
            return False
        self.handle = h
        return True

    def put(self):
        err = self.c.create_string_buffer(512)
        return self.lib.hoplite_put(self.handle, self.OBJECT, len(self.OBJECT), self.data, self.SIZE, err, 512) == 0

    def __call__(self, path):
        """One Get; on failure the program reconnects and Puts its object again."""
        self.path = path
        if self.handle is None and not (self._connect() and self.put()):
            self.close()
            return False
        err = self.c.create_string_buffer(512)
        ok = self.lib.hoplite_get(self.handle, self.OBJECT, len(self.OBJECT), 2000, self.alloc, None, err, 512) == 0
        if not ok:
            self.close()
        return ok and self.buf.raw[:1024] == self.data[:1024]

    def close(self):
        if self.handle is not None:
            self.lib.hoplite_close(self.handle)
            self.handle = None


class CollectiveProgram:
    """Two ranks (threads) of one communicator through the NCCL shim (ctypes): one call is
    one all-reduce on both, its sums checked; after a failure the job makes a new
    communicator (ncclGetUniqueId, ncclCommInitRank on both ranks) on its next call."""

    COUNT = 16 * 1024  # floats
    NCCL_FLOAT32, NCCL_SUM = 7, 0

    def __init__(self, library, socket_path):
        import ctypes
        import queue
        os.environ["CONDUIT_SOCKET"] = socket_path
        os.environ.setdefault("CONDUIT_LOG_LEVEL", "error")  # a line per failed call otherwise
        self.c = ctypes

        class UniqueId(ctypes.Structure):
            _fields_ = [("internal", ctypes.c_char * 128)]

        self.UniqueId = UniqueId
        self.lib = ctypes.CDLL(library)
        self.lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
        self.lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
        self.lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                           ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self.lib.ncclCommAbort.argtypes = [ctypes.c_void_p]
        self.comms = [None, None]
        self.step = 0
        self.send = [(ctypes.c_float * self.COUNT)() for _ in range(2)]
        self.recv = [(ctypes.c_float * self.COUNT)() for _ in range(2)]
        self.tasks = [queue.Queue(), queue.Queue()]
        self.results = queue.Queue()
        for r in range(2):
            threading.Thread(target=self._rank, args=(r,), daemon=True).start()

    def _rank(self, r):
        while True:
            task = self.tasks[r].get()
            try:
                self.results.put(task(r))
            except Exception:  # noqa: BLE001 - a failed call is a result, never a dead rank
                self.results.put(False)

    def _both(self, task):
        for q in self.tasks:
            q.put(task)
        return all([self.results.get(), self.results.get()])

    def _init(self, uid):
        def task(r):
            comm = self.c.c_void_p()
            ok = self.lib.ncclCommInitRank(self.c.byref(comm), 2, uid, r) == 0
            self.comms[r] = comm if ok else None
            return ok
        return self._both(task)

    def _allreduce(self, r):
        k = float(self.step % 5)
        buf = self.send[r]
        for i in (0, self.COUNT // 2, self.COUNT - 1):
            buf[i] = r + 1 + k
        if self.lib.ncclAllReduce(buf, self.recv[r], self.COUNT, self.NCCL_FLOAT32, self.NCCL_SUM, self.comms[r],
                                  None) != 0:
            return False
        return all(self.recv[r][i] == 3 + 2 * k for i in (0, self.COUNT // 2, self.COUNT - 1))

    def __call__(self, _path):
        if self.comms[0] is None or self.comms[1] is None:
            uid = self.UniqueId()
            if self.lib.ncclGetUniqueId(self.c.byref(uid)) != 0 or not self._init(uid):
                self.close()
                return False
        self.step += 1
        ok = self._both(self._allreduce)
        if not ok:
            self.close()
        return ok

    def close(self):
        for r in range(2):
            if self.comms[r] is not None:
                self.lib.ncclCommAbort(self.comms[r])
                self.comms[r] = None


def program_connect(path):
    # Blocking, as the shims connect: a full backlog makes connect wait, not fail.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(True)
    try:
        s.connect(path)
        return True
    finally:
        s.close()


class Prober(threading.Thread):
    def __init__(self, name, call, path, interval):
        super().__init__(daemon=True)
        self.name, self.call, self.path, self.interval = name, call, path, interval
        self.samples = []  # (start, seconds, ok)
        self.stop = False

    def run(self):
        while not self.stop:
            t0 = time.monotonic()
            try:
                ok = self.call(self.path)
            except OSError:
                ok = False
            t1 = time.monotonic()
            self.samples.append((t0, t1 - t0, ok))
            if t1 - t0 < self.interval:
                time.sleep(self.interval - (t1 - t0))


def quiet_calls(samples, spans):
    """Durations of the calls in `samples` ((start, seconds, ok)) that succeeded and started
    at least 0.5 s away from every (start, end) span: what a call costs when nothing happens."""
    return [d for (t, d, ok) in samples if ok and all(not (s - 0.5 <= t <= e + 0.5) for (s, e) in spans)]


def slowest_per_slot(samples, begin, length=0.3, slot=0.01):
    """The slowest call started in each `slot` s from `begin` for `length` s, in ms as text:
    "-" when none started, "x" when one failed."""
    slots = []
    t = begin
    while t < begin + length:
        calls = [(d, ok) for (t0, d, ok) in samples if t <= t0 < t + slot]
        if not calls:
            slots.append("-")
        elif not all(ok for _, ok in calls):
            slots.append("x")
        else:
            slots.append(f"{max(d for d, _ in calls) * 1e3:.1f}")
        t += slot
    return slots


def read_streams(text, what="chat"):
    """What greeter_client --case chat_loop (or stream_loop, what="msg") --print-each 1
    printed: its streams (messages) as (start, seconds, ok) on the host's monotonic clock,
    and its summary line."""
    streams, summary = [], ""
    for line in text.splitlines():
        f = line.split()
        if len(f) == 8 and f[0] == what and f[2] == "start_s" and f[6] == "ok":
            streams.append((float(f[3]), float(f[5]) / 1e3, f[7] == "1"))
        elif line.startswith("chats ") or line.startswith("messages "):
            summary = line
    return streams, summary


class GrpcPair:
    """greeter_server and a greeter_client under LD_PRELOAD=libmrpc-grpc.so, for the whole
    run: chat_loop (streams of 4 messages one after another; the samples are the streams) or,
    `long_stream`, stream_loop (one stream, a message every `interval` s, opened again when
    it breaks; the samples are the messages). Read from the client's output once it ends."""

    def __init__(self, build, work, sock, seconds, long_stream=False, interval=0.001, port=50091):
        self.name = "gRPC one long stream, a message per ms" if long_stream else "gRPC bidi stream, 4 messages"
        self.what = "msg" if long_stream else "chat"
        env = dict(os.environ, LD_PRELOAD=os.path.abspath(os.path.join(build, "lib", "libmrpc-grpc.so")),
                   CONDUIT_SOCKET=sock)
        tests = os.path.abspath(os.path.join(build, "tests", "bin"))
        # A line per stream, thousands a second: to a file (a pipe read only at the end
        # would fill and stop the client).
        self.out = open(os.path.join(work, f"greeter_client_{port}.out"), "w+")
        self.server = subprocess.Popen([os.path.join(tests, "greeter_server"), "--listen", f"127.0.0.1:{port}",
                                        "--mode", "sync"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, start_new_session=True)
        for line in self.server.stdout:
            if "greeter_server listening" in line:
                break
        threading.Thread(target=self.server.stdout.read, daemon=True).start()
        case = (["stream_loop", "--interval-ms", str(max(0, int(interval * 1e3)))] if long_stream
                else ["chat_loop", "--count", "4"])
        self.client = subprocess.Popen([os.path.join(tests, "greeter_client"), "--target", f"127.0.0.1:{port}",
                                        "--case"] + case + ["--bytes", "3000", "--print-each", "1",
                                        "--seconds", str(int(seconds) + 1)], env=env, stdout=self.out,
                                       stderr=subprocess.STDOUT)
        self.samples = []
        self.summary = ""

    def start(self):
        pass

    def join(self):
        self.client.wait()
        self.out.seek(0)
        self.samples, self.summary = read_streams(self.out.read(), self.what)
        self.server.terminate()
        self.server.wait()


def daemon_pid(admin):
    return json.loads(admin_get(admin)[1])["pid"]


def wait_gone(pid, timeout=20):
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gap-s", type=float, default=1.0)
    ap.add_argument("--interval-ms", type=float, default=1.0)
    args = ap.parse_args()
    conduitd = os.path.abspath(os.path.join(args.build, "bin", "conduitd"))
    conduitctl = os.path.abspath(os.path.join(args.build, "bin", "conduitctl"))
    work = tempfile.mkdtemp(prefix="upgrade-bench.")
    sock, admin = os.path.join(work, "c.sock"), os.path.join(work, "c-admin.sock")
    cmd = [conduitd, "--socket", sock, "--listen", "127.0.0.1:0", "--log-level", "warn"]
    # The gRPC pair's streams run for the whole schedule below.
    run_seconds = args.gap_s * (2 * args.rounds + 1) + 2 * args.rounds
    log = open(os.path.join(work, "conduitd.log"), "a")

    def start():
        p = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
        until = time.monotonic() + 20
        while time.monotonic() < until:
            try:
                if admin_status(admin):
                    return p
            except OSError:
                pass
            time.sleep(0.005)
        sys.exit("conduitd did not start; see " + log.name)

    start()
    interval = args.interval_ms / 1e3
    objects = ObjectProgram(os.path.abspath(os.path.join(args.build, "lib", "libhoplite.so.0")))
    collectives = CollectiveProgram(os.path.abspath(os.path.join(args.build, "lib", "libnccl.so.2")), sock)
    probers = [Prober("program socket connect", program_connect, sock, interval),
               Prober("admin GET /v1/status", admin_status, admin, interval),
               Prober("object program Get (one connection)", objects, sock, interval),
               Prober("NCCL job all-reduce, 2 ranks", collectives, sock, interval)]
    grpc_pair = GrpcPair(args.build, work, sock, run_seconds)
    grpc_stream = GrpcPair(args.build, work, sock, run_seconds, long_stream=True, interval=interval, port=50092)
    for p in probers:
        p.start()
    events = []  # (kind, start, end)
    time.sleep(args.gap_s)
    for _ in range(args.rounds):
        t0 = time.monotonic()
        r = subprocess.run([conduitctl, "--socket", admin, "upgrade"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("upgrade failed: " + r.stderr)
        events.append(("live upgrade", t0, time.monotonic()))
        time.sleep(args.gap_s)
    for _ in range(args.rounds):
        pid = daemon_pid(admin)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        wait_gone(pid)
        start()
        events.append(("stop and restart", t0, time.monotonic()))
        time.sleep(args.gap_s)
    for p in probers:
        p.stop = True
    for p in probers:
        p.join()
    grpc_pair.join()
    grpc_stream.join()
    probers += [grpc_pair, grpc_stream]
    collectives.close()
    os.kill(daemon_pid(admin), signal.SIGTERM)

    print(f"# conduitd replaced {args.rounds} times live and {args.rounds} times by stop-and-restart; "
          f"callers starting a call every {args.interval_ms:g} ms throughout")
    print()
    print("| event | caller | calls in the window | failed | callers cut off (ms) | back after (ms) | slowest call (ms) "
          "| median call, quiet (ms) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p in probers:
        quiet = quiet_calls(p.samples, [(s, e) for (_, s, e) in events])
        median = statistics.median(quiet) * 1e3 if quiet else float("nan")
        for kind, s, e in events:
            window = [(t, d, ok) for (t, d, ok) in p.samples if s - 0.05 <= t <= e + 0.05]
            failed = [(t, d) for (t, d, ok) in window if not ok]
            cut = (max(t + d for t, d in failed) - min(t for t, d in failed)) * 1e3 if failed else 0.0
            slowest = max((d for (t, d, ok) in window), default=0.0) * 1e3
            # From the first failed call to the end of the first call that succeeded after it
            # (a job that must make a new communicator comes back only then).
            back = 0.0
            if failed:
                first = min(t for t, d in failed)
                after = [t + d for (t, d, ok) in p.samples if ok and t > first]
                back = (min(after) - first) * 1e3 if after else float("inf")
            print(f"| {kind} | {p.name} | {len(window)} | {len(failed)} | {cut:.1f} | {back:.1f} | {slowest:.1f} "
                  f"| {median:.3f} |")
    print()
    # The programs over time around the first event of each kind: the slowest call per 10 ms
    # (x: a call failed in that slot), from 20 ms before the event, or before the first
    # failed call, for 300 ms.
    for p in probers[2:]:
        for kind in ("live upgrade", "stop and restart"):
            s, e = next((s, e) for (k, s, e) in events if k == kind)
            failed = [t0 for (t0, d, ok) in p.samples if s <= t0 <= e + 0.05 and not ok]
            begin = (failed[0] if failed else s) - 0.02
            slots = slowest_per_slot(p.samples, begin)
            where = "its first failed call" if failed else "its start"
            print(f"{p.name}, {kind}: slowest call (ms) per 10 ms from 20 ms before {where}, "
                  f"{(begin + 0.02 - s) * 1e3:.0f} ms into the event: " + " ".join(slots))
    print()
    print(f"(log: {log.name})")


if __name__ == "__main__":
    main()
