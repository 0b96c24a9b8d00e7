#!/usr/bin/python3
"""Gloo (PyTorch CPU) baseline for the object-store benchmark (objects_bench.sh).

broadcast / gather / reduce / all_reduce of float32 tensors from/to rank 0, timed like
hoplite-bench: per size a warmup (<= 64 MiB), then 50 / 10 / 3 / 1 runs (<= 64 KiB / <= 1 MiB /
<= 64 MiB / larger), each after --gap-ms idle (15x that from 64 MiB, as hoplite-bench) and a
barrier, until the slowest rank finishes; rank 0 prints "op hosts size_bytes iters median_ms
min_ms".
"""
import argparse
import time

import torch
import torch.distributed as dist


def parse_bytes(s):
    mult = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}.get(s[-1].lower(), 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--op", required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--gap-ms", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=a.init, rank=a.rank, world_size=a.world)
    for tok in a.sizes.split(","):
        size = parse_bytes(tok)
        count = (size + 3) // 4
        x = torch.ones(count, dtype=torch.float32)
        gather_list = [torch.empty(count, dtype=torch.float32) for _ in range(a.world)] if a.rank == 0 else None
        iters = 50 if size <= 64 << 10 else 10 if size <= 1 << 20 else 3 if size <= 64 << 20 else 1
        warm = 1 if size <= 64 << 20 else 0
        gap = max(0, a.gap_ms) * (15 if size >= 64 << 20 else 1) / 1e3
        times = []
        for it in range(warm + iters):
            y = x.clone() if a.op in ("reduce", "allreduce") else x
            time.sleep(gap)
            dist.barrier()
            t0 = time.perf_counter()
            if a.op == "bcast":
                dist.broadcast(y, src=0)
            elif a.op == "gather":
                dist.gather(y, gather_list=gather_list, dst=0)
            elif a.op == "reduce":
                dist.reduce(y, dst=0)
            elif a.op == "allreduce":
                dist.all_reduce(y)
            mine = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
            if it >= warm:
                times.append(mine.item() * 1e3)
        if a.rank == 0:
            times.sort()
            print("%s %d %d %d %.3f %.3f" % (a.op, a.world, size, iters, times[len(times) // 2], times[0]), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
