#!/usr/bin/python3
"""torch.distributed (gloo) collective baseline with conduit-perf's timing rules.

Float32 (or --dtype float16/bfloat16; sum where it reduces); --coll allreduce (default), allgather, reducescatter,
broadcast (root 0), reduce (root 0) or alltoall. Sizes follow nccl-tests: the whole buffer (an all-gather's output, a
reduce-scatter's input, an all-to-all's send buffer; each rank's share is size / ranks). Per size a warmup that probes
speed, a timed loop capped by a time budget (agreed with MAX so all ranks run the same
loop), and the average time of the slowest rank. Rank 0 prints "size_bytes count time_us
algbw_GBs busbw_GBs wrong".
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
    ap.add_argument("--coll", default="allreduce",
                    choices=["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    a = ap.parse_args()
    global DTYPE
    DTYPE = getattr(torch, a.dtype)
    esize = torch.tensor([], dtype=DTYPE).element_size()

    # Two cores shared by every rank of every "host": one intra-op thread each
    # keeps ranks from fighting over cores during reductions.
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=a.init, rank=a.rank, world_size=a.world)
    n = a.world
    names = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
             "broadcast": "broadcast", "reduce": "reduce", "alltoall": "all_to_all_single"}
    if a.rank == 0:
        print(f"# size_bytes count time_us algbw_GBs busbw_GBs wrong (gloo {names[a.coll]} {a.dtype}, {n} ranks)",
              flush=True)
    # nccl-tests' bus bandwidth factors.
    busbw_factor = {"allreduce": 2 * (n - 1) / n, "allgather": (n - 1) / n, "reducescatter": (n - 1) / n,
                    "broadcast": 1.0, "reduce": 1.0, "alltoall": (n - 1) / n}[a.coll]

    if a.coll == "reducescatter" and not gloo_has_reduce_scatter(n):
        if a.rank == 0:
            print(f"# this torch's gloo has no reduce_scatter (torch {torch.__version__})", flush=True)
        dist.destroy_process_group()
        return
    size, max_bytes = parse_bytes(a.b), parse_bytes(a.e)
    while size <= max_bytes:
        count = size // esize // n * n  # whole elements, divisible among the ranks
        if count > 0:
            try:
                op = Collective(a.coll, count, a.rank, n)
                op.run()
            except RuntimeError as e:  # e.g. a dtype this torch's gloo lacks, on every rank alike
                if a.rank == 0:
                    print(f"# gloo cannot run {a.coll} on {a.dtype} here: {e}", flush=True)
                break
            iters = a.n
            if a.w > 0:
                t0 = time.perf_counter()
                done = 0
                while done < a.w:
                    op.run()
                    done += 1
                    el = time.perf_counter() - t0
                    if a.T > 0 and agree_max(el) > a.T / 3:
                        break
                if a.T > 0:
                    per = agree_max(el / done)
                    iters = int(max(1, min(a.n, a.T // max(per, 1e-9))))
            t0 = time.perf_counter()
            for _ in range(iters):
                op.run()
            t = agree_max((time.perf_counter() - t0) / iters)
            wrong = torch.tensor([op.check()], dtype=torch.int64)
            dist.all_reduce(wrong)
            if a.rank == 0:
                algbw = count * esize / t / 1e9
                print(f"{count * esize} {count} {t * 1e6:.1f} {algbw:.4f} {algbw * busbw_factor:.4f} {wrong.item()}",
                      flush=True)
        size = max(size + 1, int(size * a.f))
    dist.destroy_process_group()


def gloo_has_reduce_scatter(n):
    """Older torch (1.13, Debian 12's) raises for reduce_scatter on gloo, on every rank."""
    try:
        dist.reduce_scatter(torch.zeros(1), [torch.zeros(1) for _ in range(n)])
        return True
    except RuntimeError:
        return False


DTYPE = torch.float32  # --dtype


def contribution(rank, idx):
    """Rank `rank`'s values at indices idx: small integers, so sums are exact."""
    return (1 + (rank * 3 + idx) % 5).to(DTYPE)


class Collective:
    """One collective on `count` DTYPE elements (the whole buffer), timed by run()."""

    def __init__(self, coll, count, rank, n):
        self.coll, self.count, self.rank, self.n = coll, count, rank, n
        share = count // n
        if coll in ("allreduce", "reduce"):
            self.base = contribution(rank, torch.arange(count))
            self.buf = self.base.clone()
        elif coll == "allgather":
            self.inp = contribution(rank, torch.arange(share))
            self.out = torch.zeros(count, dtype=DTYPE)
            self.parts = list(self.out.chunk(n))  # views into one buffer, as nccl-tests lays it out
        elif coll == "reducescatter":
            self.inp = contribution(rank, torch.arange(count))
            self.out = torch.zeros(share, dtype=DTYPE)
        elif coll == "alltoall":
            self.inp = contribution(rank, torch.arange(count))  # block k goes to rank k
            self.out = torch.zeros(count, dtype=DTYPE)
        else:
            self.base = contribution(0, torch.arange(count))
            self.buf = self.base.clone() if rank == 0 else torch.zeros(count, dtype=DTYPE)

    def run(self):
        if self.coll == "allreduce":
            # In place, like torch programs use it; values grow (5 * n^iters at most): finite
            # in float32 for our n and iters; in float16 they reach infinity after a few
            # calls. check() starts again from the inputs.
            dist.all_reduce(self.buf)
        elif self.coll == "allgather":
            dist.all_gather(self.parts, self.inp)
        elif self.coll == "reducescatter":
            dist.reduce_scatter(self.out, list(self.inp.chunk(self.n)))
        elif self.coll == "alltoall":
            dist.all_to_all_single(self.out, self.inp)
        elif self.coll == "reduce":
            # In place, root 0, as torch programs call it (only the root's result is defined).
            dist.reduce(self.buf, 0)
        else:
            dist.broadcast(self.buf, 0)

    def check(self):
        """Runs once more from fresh inputs; returns the number of wrong elements."""
        n, count, share = self.n, self.count, self.count // self.n
        if self.coll in ("allreduce", "reduce"):
            self.buf.copy_(self.base)
            self.run()
            if self.coll == "reduce" and self.rank != 0:
                return 0
            want = sum(contribution(r, torch.arange(count)) for r in range(n))
            return int((self.buf != want).sum().item())
        if self.coll == "allgather":
            self.out.zero_()
            self.run()
            want = torch.cat([contribution(r, torch.arange(share)) for r in range(n)])
            return int((self.out != want).sum().item())
        if self.coll == "reducescatter":
            self.run()
            idx = torch.arange(self.rank * share, (self.rank + 1) * share)
            want = sum(contribution(r, idx) for r in range(n))
            return int((self.out != want).sum().item())
        if self.coll == "alltoall":
            self.out.zero_()
            self.run()
            # Block r came from rank r: the block of its send buffer meant for this rank.
            idx = torch.arange(self.rank * share, (self.rank + 1) * share)
            want = torch.cat([contribution(r, idx) for r in range(n)])
            return int((self.out != want).sum().item())
        if self.rank != 0:
            self.buf.zero_()
        self.run()
        return int((self.buf != self.base).sum().item())


if __name__ == "__main__":
    main()
