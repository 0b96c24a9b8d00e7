#!/usr/bin/python3
"""torch.distributed (gloo) all_reduce baseline with conduit-perf's timing rules.

Float32 sum; per size a warmup that probes speed, a timed loop capped by a time
budget (agreed with MAX so all ranks run the same loop), and the average time of
the slowest rank. Rank 0 prints "size_bytes count time_us algbw_GBs busbw_GBs wrong".
"""
import argparse
import time

import torch
import torch.distributed as dist


def parse_bytes(s):
    mult = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}.get(s[-1].lower(), 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def agree_max(v):
    t = torch.tensor([v], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", required=True, help="tcp://IP:PORT of rank 0")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("-b", default="1K")
    ap.add_argument("-e", default="1K")
    ap.add_argument("-f", type=float, default=4)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("-T", type=float, default=2.0)
    a = ap.parse_args()

    # Two cores shared by every rank of every "host": one intra-op thread each
    # keeps ranks from fighting over cores during reductions.
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=a.init, rank=a.rank, world_size=a.world)
    n = a.world
    if a.rank == 0:
        print(f"# size_bytes count time_us algbw_GBs busbw_GBs wrong (gloo all_reduce float32 sum, {n} ranks)",
              flush=True)

    size, max_bytes = parse_bytes(a.b), parse_bytes(a.e)
    while size <= max_bytes:
        count = size // 4
        if count > 0:
            idx = torch.arange(count, dtype=torch.int64)
            base = (1 + (a.rank * 3 + idx) % 5).to(torch.float32)
            buf = base.clone()
            iters = a.n
            if a.w > 0:
                t0 = time.perf_counter()
                done = 0
                while done < a.w:
                    buf.copy_(base)  # all_reduce is in place; keep values bounded
                    dist.all_reduce(buf)
                    done += 1
                    el = time.perf_counter() - t0
                    if a.T > 0 and agree_max(el) > a.T / 3:
                        break
                if a.T > 0:
                    per = agree_max(el / done)
                    iters = int(max(1, min(a.n, a.T // max(per, 1e-9))))
            # In place, like torch programs use it; values grow but stay finite
            # (at most 5 * n^iters is far from float overflow for our n and iters).
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf)
            t = agree_max((time.perf_counter() - t0) / iters)
            buf.copy_(base)
            dist.all_reduce(buf)
            want = torch.zeros(count, dtype=torch.float32)
            for r in range(n):
                want += (1 + (r * 3 + idx) % 5).to(torch.float32)
            wrong = torch.tensor([int((buf != want).sum().item())], dtype=torch.int64)
            dist.all_reduce(wrong)
            if a.rank == 0:
                algbw = count * 4 / t / 1e9
                print(f"{count * 4} {count} {t * 1e6:.1f} {algbw:.4f} {algbw * 2 * (n - 1) / n:.4f} {wrong.item()}",
                      flush=True)
        size = max(size + 1, int(size * a.f))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
