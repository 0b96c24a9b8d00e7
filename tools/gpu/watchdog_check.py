#!/usr/bin/env python3
"""A hung collective through the shim is seen by PyTorch's watchdog, as with NCCL.

  watchdog_check.py --shim build/lib/libnccl.so.2

Two ranks share GPU 0. After one all-reduce together, rank 1 stops calling; rank 0's next
all-reduce must return at once (asynchronous enqueue: a call that blocked until its peers
came would hide the hang from the watchdog, which only sees work once the call returns),
and ProcessGroupNCCL's watchdog must find it past the group's 5 s timeout, abort the
communicator (ncclCommAbort, which must release the waiting stream) and end rank 0 within
the check's limit. Exit 0 when rank 0 ended that way; conduitd must stay up (gpu-check
checks it after every step).
"""
import os
import subprocess
import sys
import time
from datetime import timedelta

from ranks import free_port, job_arguments, rank_env

TIMEOUT_S = 5
LIMIT_S = 45


def worker():
    import torch
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev, timeout=timedelta(seconds=TIMEOUT_S))
    x = torch.ones(1 << 20, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print("rank %d: first all-reduce %s" % (rank, "ok" if float(x[0]) == 2.0 else "WRONG"), flush=True)
    if rank == 1:
        time.sleep(LIMIT_S + 15)  # never calls again; killed by the runner
        return 0
    t = time.time()
    dist.all_reduce(x)
    print("rank 0: all-reduce with no peer returned in %.1f ms" % ((time.time() - t) * 1e3), flush=True)
    time.sleep(LIMIT_S + 15)  # the watchdog must end this process first
    print("rank 0: still alive: the watchdog did not act", flush=True)
    return 3


def main():
    args = job_arguments(__doc__, LIMIT_S)
    if args.worker:
        return worker()
    port = free_port()
    procs = []
    for rank in range(2):
        # No flight-recorder dump, and 2 s instead of 60 between the watchdog's report and its
        # teardown (it sleeps 4x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC first).
        env = rank_env(rank, 2, port, args.shim, TORCH_NCCL_DUMP_ON_TIMEOUT="0", TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC="500")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    start = time.time()
    try:
        out0, _ = procs[0].communicate(timeout=LIMIT_S)
        code0 = procs[0].returncode
    except subprocess.TimeoutExpired:
        procs[0].kill()
        out0, _ = procs[0].communicate()
        code0 = None
    took = time.time() - start
    procs[1].kill()
    procs[1].communicate()
    sys.stdout.write("".join("  rank 0| " + line + "\n" for line in out0.splitlines()[-14:]))
    returned = [l for l in out0.splitlines() if "returned in" in l]
    call_ms = float(returned[0].split("returned in ")[1].split()[0]) if returned else None
    seen = "Watchdog caught collective operation timeout" in out0 or "timed out" in out0.lower()
    ok = code0 not in (None, 0, 3) and seen and call_ms is not None and call_ms < 1000
    print("watchdog_check: call returned in %s ms; rank 0 %s after %.1f s (exit %s); watchdog timeout %s: %s" % (
        "%.1f" % call_ms if call_ms is not None else "never", "still running" if code0 is None else "ended", took,
        code0, "reported" if seen else "NOT reported", "PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
