#!/usr/bin/env python3
"""DDP through Conduit's libnccl.so.2: losses against a single-process reference.

Trains a small model for --steps steps with DistributedDataParallel on --world ranks that
all use GPU 0 (native NCCL refuses two ranks on one GPU; Conduit's daemon serves them), each
rank a separate process started with LD_PRELOAD=--shim when given. The global batch is split
evenly, so the averaged gradient equals the full batch's and every step's loss must equal
the one a single process computes on the whole batch (up to summation order).

  ddp_check.py reference --out ref.json
  ddp_check.py run --world 2 --shim build/lib/libnccl.so.2 --out w2.json
  ddp_check.py compare ref.json w2.json

Each rank writes its per-step global loss and its mean step time (after warm-up); rank 0's
file is --out. The worker mode is internal. --device cpu --backend gloo checks the script
itself on a machine without a GPU.
"""
import argparse
import json
import os
import sys
import time

from ranks import run_ranks

FEATURES = 32
HIDDEN = 256
GLOBAL_BATCH = 128
WARMUP = 10


def build(torch, steps, seed, hidden=HIDDEN):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, hidden), torch.nn.Tanh(),
        torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
        torch.nn.Linear(hidden, 1))
    x = torch.randn(steps, GLOBAL_BATCH, FEATURES)
    y = torch.randn(steps, GLOBAL_BATCH, 1)
    return model, x, y


def reference(args):
    import torch
    device = torch.device(args.device)
    model, x, y = build(torch, args.steps, args.seed, args.hidden)
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    for step in range(args.steps):
        loss = torch.nn.functional.mse_loss(model(x[step].to(device)), y[step].to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with open(args.out, "w") as f:
        json.dump({"world": 0, "losses": losses}, f)


def worker(args):
    import torch
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, rank=rank, world_size=world)
    model, x, y = build(torch, args.steps, args.seed, args.hidden)
    model.to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    shard = GLOBAL_BATCH // world
    lo, hi = rank * shard, (rank + 1) * shard
    losses = []
    start = None
    for step in range(args.steps):
        if step == WARMUP:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
        loss = torch.nn.functional.mse_loss(ddp(x[step, lo:hi].to(device)), y[step, lo:hi].to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / world)
    elapsed = time.perf_counter() - start
    # Every rank must end with the same parameters.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    spread = max((g - flat).abs().max().item() for g in gathered)
    dist.destroy_process_group()
    out = args.out if rank == 0 else args.out + ".rank%d" % rank
    with open(out, "w") as f:
        json.dump({"world": world, "rank": rank, "losses": losses,
                   "step_ms": 1000.0 * elapsed / (args.steps - WARMUP), "param_spread": spread}, f)


def run(args):
    return run_ranks("ddp_check", args.world, __file__,
                     ["worker", "--out", args.out, "--steps", str(args.steps), "--seed", str(args.seed), "--lr",
                      str(args.lr), "--device", args.device, "--backend", args.backend, "--hidden", str(args.hidden)],
                     args.shim, args.timeout)


def compare(args):
    with open(args.reference) as f:
        ref = json.load(f)["losses"]
    worst = 0
    for path in args.runs:
        with open(path) as f:
            got = json.load(f)
        ranks = [got]
        for r in range(1, got["world"]):
            with open(path + ".rank%d" % r) as f:
                ranks.append(json.load(f))
        diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got["losses"], ref))
        agree = all(r["losses"] == got["losses"] for r in ranks)
        ok = len(got["losses"]) == len(ref) and diff <= args.rtol and agree and got["param_spread"] == 0
        worst = max(worst, 0 if ok else 1)
        print("ddp %s: world %d, %d steps, loss %.6f -> %.6f (reference %.6f -> %.6f), max rel diff %.2e, "
              "ranks agree %s, param spread %.1e, %.2f ms/step: %s"
              % (path, got["world"], len(got["losses"]), got["losses"][0], got["losses"][-1], ref[0], ref[-1],
                 diff, agree, got["param_spread"], got["step_ms"], "PASS" if ok else "FAIL"))
    return worst


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["reference", "run", "worker", "compare"])
    p.add_argument("files", nargs="*", help="compare: the reference, then runs")
    p.add_argument("--out", default="ddp.json")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--shim", default="", help="libnccl.so.2 to LD_PRELOAD into every rank")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--hidden", type=int, default=HIDDEN,
                   help="width of the hidden layers; 4096 makes DDP buckets of 25 MiB (larger than a 20 MiB page "
                        "of PyTorch's expandable segments)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--backend", default="nccl")
    p.add_argument("--timeout", type=int, default=180)
    p.add_argument("--rtol", type=float, default=1e-4)
    args = p.parse_args()
    if args.mode == "reference":
        return reference(args)
    if args.mode == "worker":
        return worker(args)
    if args.mode == "run":
        return run(args)
    if len(args.files) < 2:
        p.error("compare needs the reference and at least one run")
    args.reference, args.runs = args.files[0], args.files[1:]
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
