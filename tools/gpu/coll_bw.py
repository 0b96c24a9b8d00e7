#!/usr/bin/env python3
"""All-reduce of N ranks sharing one GPU, through PyTorch's ProcessGroupNCCL, against the
GPU's own device-to-device copy bandwidth measured in the same run.

  coll_bw.py --world 2 --shim build/lib/libnccl.so.2

Each rank is a process on GPU 0 (LD_PRELOAD=--shim). Per size: --iters all-reduces of a
float32 tensor after warm-up, timed with CUDA events on rank 0's stream after a barrier;
algbw = bytes / time, busbw = algbw x 2(n-1)/n (nccl-tests' definitions); call_us is
how long each call held the calling thread (NCCL's calls return once enqueued). Every rank checks
the last result (the sum of rank + 1 over ranks). Rank 0 first times a 1 GiB tensor copy
on the device (bytes copied / time, each byte read once and written once) as the ceiling:
ranks sharing a GPU reduce through its memory. Prints one line per size.
"""
import os
import sys
import time

from ranks import job_arguments, run_ranks

SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]


def copy_bandwidth(torch):
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 10
    start.record()
    for _ in range(reps):
        dst.copy_(src)
    end.record()
    end.synchronize()
    return reps * n / (start.elapsed_time(end) / 1000.0)


def worker(args):
    import torch
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(0)
    if rank == 0:
        copy = copy_bandwidth(torch)
        print("d2d copy: %.1f GB/s (1 GiB tensor copy, bytes copied / time)" % (copy / 1e9), flush=True)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda:0"))
    failures = 0
    if rank == 0:
        print("%12s %8s %12s %12s %10s %10s %s" % ("bytes", "iters", "time_us", "call_us", "algbw_GB/s", "busbw_GB/s",
                                                  "check"),
              flush=True)
    for size in SIZES:
        if size > args.max_bytes:
            break
        n = max(1, size // 4)
        t = torch.zeros(n, device="cuda")  # sums of zeros stay finite however many times
        iters = args.iters if size <= (16 << 20) else max(5, args.iters // 10)
        for _ in range(args.warmup):
            dist.all_reduce(t)
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        host = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        host = time.perf_counter() - host  # how long the calls held the CPU thread
        end.record()
        end.synchronize()
        us = start.elapsed_time(end) * 1000.0 / iters
        call_us = host * 1e6 / iters
        # The last all-reduce's result, from fresh values.
        t.fill_(float(rank + 1))
        dist.all_reduce(t)
        want = world * (world + 1) / 2
        ok = bool((t == want).all().item())
        failures += 0 if ok else 1
        if rank == 0:
            algbw = n * 4 / (us / 1e6) / 1e9
            busbw = algbw * 2 * (world - 1) / world
            print("%12d %8d %12.1f %12.1f %10.2f %10.2f %s" % (n * 4, iters, us, call_us, algbw, busbw,
                                                           "ok" if ok else "WRONG"),
                  flush=True)
    dist.destroy_process_group()
    return 1 if failures else 0


def run(args):
    return run_ranks("coll_bw", args.world, __file__,
                     ["--worker", "--iters", str(args.iters), "--warmup", str(args.warmup), "--max-bytes",
                      str(args.max_bytes)], args.shim, args.timeout)



def main():
    def add(p):
        p.add_argument("--iters", type=int, default=50)
        p.add_argument("--warmup", type=int, default=5)
        p.add_argument("--max-bytes", type=int, default=1 << 30)
    args = job_arguments(__doc__, 180, add)
    return worker(args) if args.worker else run(args)


if __name__ == "__main__":
    sys.exit(main())
