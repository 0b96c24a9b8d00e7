#!/usr/bin/env python3
"""Collective results of N ranks sharing GPU 0, through PyTorch's ProcessGroupNCCL, against
the same arithmetic done by PyTorch on one rank: every dtype PyTorch can hand NCCL, every
reduction op, aligned and unaligned buffers, counts with and without a tail.

  coll_check.py --world 4 --shim build/lib/libnccl.so.2

Rank r's input is a deterministic pattern of (r, case). Sums, products, minima and maxima
must be bit-exact with the left fold ((x0 op x1) op x2) ... in the dtype (the daemon's
combine kernel folds in rank order, rounding each step to the stored type, like the host
path); AVG and PREMUL_SUM (the factor a float, or a tensor on the GPU: NCCL's ncclScalarDevice)
are checked to 2·n units in the last place of the dtype relative to the sum of the scaled
inputs' magnitudes (PREMUL_SUM not on bfloat16, below). Also all_gather,
reduce_scatter, broadcast, a send/recv ring, all_to_all_single with unequal splits, and
all-reduces whose inputs a matrix multiplication is still computing. Prints one line per failing case and a summary; exit 1 on
any mismatch.
"""
import os
import sys

from ranks import job_arguments, run_ranks

COUNTS = [1, 7, 1000, 4096, 1 << 20, (1 << 20) + 3]


def pattern(torch, dtype, rank, case, n, device):
    g = torch.Generator().manual_seed(1000 * case + rank)
    if dtype.is_floating_point:
        x = torch.randn(n, generator=g, dtype=torch.float64) * 4
    else:
        x = torch.randint(0, 5 if dtype == torch.uint8 else 9, (n,), generator=g, dtype=torch.int64)
        if dtype != torch.uint8:
            x -= 4
    return x.to(dtype).to(device)


def premul_op(dist, factor):
    # PyTorch's binding takes a float, or a tensor factor (some releases: a list of them).
    try:
        return dist._make_nccl_premul_sum(factor)
    except TypeError:
        return dist._make_nccl_premul_sum([factor])


def worker(args):
    import torch
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    R = dist.ReduceOp
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.int8,
              torch.uint8]
    ops = [("sum", R.SUM), ("prod", R.PRODUCT), ("min", R.MIN), ("max", R.MAX), ("avg", R.AVG),
           ("premul", "premul"), ("premul_tensor", "premul")]
    exact_fold = {"sum": lambda a, b: a + b, "prod": lambda a, b: a * b, "min": torch.minimum, "max": torch.maximum}
    failures = 0
    cases = 0
    case = 0

    def tally(n, *results):
        """Counts (what, ok) results of count n, reporting the failed ones."""
        nonlocal cases, failures
        cases += len(results)
        for what, ok in results:
            if not ok:
                failures += 1
                if rank == 0:
                    print("FAIL %s count %d" % (what, n), flush=True)
    for dtype in dtypes:
        for name, op in ops:
            if name in ("avg", "premul", "premul_tensor") and not dtype.is_floating_point:
                continue
            if name.startswith("premul") and dtype == torch.bfloat16:
                # PyTorch hands ncclRedOpCreatePreMulSum a float factor for bfloat16, and
                # NCCL (like Conduit) copies sizeof(bfloat16) bytes of it: the factor reads
                # as 0 on both. Nothing to compare against.
                continue
            for n in COUNTS:
                for offset in (0, 1):  # 1: the buffer starts one element in (not 16-byte aligned)
                    case += 1
                    xs = [pattern(torch, dtype, r, case, n + offset, dev)[offset:] for r in range(world)]
                    t = xs[rank].clone() if offset == 0 else torch.cat([xs[rank][:1], xs[rank]])[1:]
                    if name.startswith("premul"):
                        # A factor on the GPU (a tensor) is NCCL's ncclScalarDevice: the shim
                        # must read it from device memory, in stream order.
                        factor = 0.5 if name == "premul" else torch.tensor(0.5 + rank, dtype=dtype, device=dev)
                        dist.all_reduce(t, op=premul_op(dist, factor))
                        factors = [0.5] * world if name == "premul" else [0.5 + r for r in range(world)]
                        want = sum(x.double() * f for x, f in zip(xs, factors))
                    else:
                        dist.all_reduce(t, op=op)
                        if name == "avg":
                            want = sum(x.double() for x in xs) / world
                        else:
                            want = xs[0]
                            for x in xs[1:]:
                                want = exact_fold[name](want, x)
                    cases += 1
                    if name in exact_fold:
                        ok = torch.equal(t, want)
                    else:
                        # Rounding each scaled input and each partial sum to the dtype errs by
                        # up to a few units in the last place of the inputs' magnitudes, not
                        # of the result's (a sum near 0 of large terms): bound it by those.
                        factors = factors if name.startswith("premul") else [1.0 / world] * world
                        scale = sum((x.double() * f).abs() for x, f in zip(xs, factors))
                        eps = {torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7, torch.float32: 2.0 ** -23}.get(
                            dtype, 2.0 ** -52)
                        ok = bool(((t.double() - want.double()).abs() <= 2 * world * eps * scale + 1e-30).all())
                    if not ok:
                        failures += 1
                        if rank == 0 and failures <= 10:
                            bad = (t.double() != want.double()).nonzero()[:3].flatten().tolist()
                            print("FAIL all_reduce %s %s count %d offset %d: first differing %s: got %s want %s" % (
                                name, dtype, n, offset, bad, t[bad].tolist(), want[bad].tolist()), flush=True)
    for n in (1, 1000, (1 << 20) + 3):
        case += 1
        x = pattern(torch, torch.float32, rank, case, n * world, dev)
        xs = [pattern(torch, torch.float32, r, case, n * world, dev) for r in range(world)]
        out = [torch.empty(n * world, device=dev) for _ in range(world)]
        dist.all_gather(out, x)
        ok_g = all(torch.equal(out[r], xs[r]) for r in range(world))
        rs = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(rs, x)
        want = xs[0][rank * n:(rank + 1) * n]
        for y in xs[1:]:
            want = want + y[rank * n:(rank + 1) * n]
        ok_rs = torch.equal(rs, want)
        b = x.clone()
        dist.broadcast(b, src=world - 1)
        ok_b = torch.equal(b, xs[world - 1])
        tally(n, ("all_gather", ok_g), ("reduce_scatter", ok_rs), ("broadcast", ok_b))
    # Point-to-point on device buffers: a ring of sends and receives in one group, and
    # all-to-all with equal and unequal splits (conduitd carries them through its own stream).
    for n in (1, 1000, (1 << 20) + 3):
        case += 1
        xs = [pattern(torch, torch.float32, r, case, n, dev) for r in range(world)]
        got = torch.empty(n, device=dev)
        ring = [dist.P2POp(dist.isend, xs[rank], (rank + 1) % world),
                dist.P2POp(dist.irecv, got, (rank - 1) % world)]
        for req in dist.batch_isend_irecv(ring):
            req.wait()
        ok_ring = torch.equal(got, xs[(rank - 1) % world])
        splits = [(n + r + s) % 7 + (n if r == s else 0) for s in range(world) for r in range(world)]
        # splits[s * world + r]: what rank s sends rank r.
        ins = [pattern(torch, torch.float32, s, case, sum(splits[s * world:(s + 1) * world]), dev) for s in range(world)]
        send = [splits[rank * world + r] for r in range(world)]
        recv = [splits[s * world + rank] for s in range(world)]
        out = torch.empty(sum(recv), device=dev)
        dist.all_to_all_single(out, ins[rank], output_split_sizes=recv, input_split_sizes=send)
        want = torch.cat([ins[s][sum(splits[s * world:s * world + rank]):][:splits[s * world + rank]]
                          for s in range(world)])
        ok_a2a = torch.equal(out, want)
        tally(n, ("send/recv ring", ok_ring), ("all_to_all_single", ok_a2a))
    # Asynchronous enqueue against compute: each input is a fresh tensor that a matrix
    # multiplication (a few ms) is still computing when the all-reduce is called, and the
    # result feeds the next multiplication before anything waits. Checked once at the end.
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.full((4096, 4096), 1.0 / 4096, device=dev)  # a @ v == v for v constant by column
    v = torch.full((4096, 1024), float(rank + 1), device=dev)
    vals = [float(r + 1) for r in range(world)]
    for _ in range(10):
        x = (a @ v) * 2 + rank
        dist.all_reduce(x)
        v = x / world
        s = sum(2 * vals[r] + r for r in range(world))
        vals = [s / world] * world
    cases += 1
    if not bool(((v - vals[0]).abs() <= 1e-4 * vals[0]).all()):
        failures += 1
        if rank == 0:
            print("FAIL all_reduce behind matmul: got %s want %s" % (v[0, :3].tolist(), vals[0]), flush=True)
    total = torch.tensor([failures], device=dev)
    dist.all_reduce(total)
    if rank == 0:
        print("coll_check world %d: %d cases per rank, %d failures over all ranks" % (world, cases, int(total.item())),
              flush=True)
    dist.destroy_process_group()
    return 1 if int(total.item()) else 0


def run(args):
    return run_ranks("coll_check", args.world, __file__, ["--worker"], args.shim, args.timeout)



def main():
    args = job_arguments(__doc__, 150)
    return worker(args) if args.worker else run(args)


if __name__ == "__main__":
    sys.exit(main())
