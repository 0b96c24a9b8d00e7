#!/usr/bin/env python3
"""Ray object-store baseline for the object-store benchmark (objects_bench.sh).

Runs as a Ray driver against a cluster with one node per host namespace; node i has the
custom resource "h<i>". One actor per node plays that host's program:
  bcast:     actor 0 puts; actors 1.. get it (zero-copy numpy) at once.
  gather:    every actor puts; actor 0 gets every other object.
  reduce:    every actor puts; actor 0 gets all and sums them (Ray has no reduce).
  allreduce: reduce as above, actor 0 puts the sum, the other actors get it.
Timing as hoplite-bench (warmup <= 64 MiB, 50/10/3/1 runs, median); the clock runs from the
driver's first call to the last completion (one actor call round trip included).
Prints "op hosts size_bytes iters median_ms min_ms".
"""
import argparse
import time

import numpy as np
import ray


def parse_bytes(s):
    mult = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}.get(s[-1].lower(), 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


@ray.remote(num_cpus=0)
class Host:
    def put(self, size):
        return [ray.put(np.ones((size + 3) // 4, np.float32))]

    def get(self, boxed):
        a = ray.get(boxed[0])
        return a.nbytes

    def get_all(self, boxes):
        return sum(ray.get(b[0]).nbytes for b in boxes)

    def reduce_all(self, boxes, put_result):
        acc = None
        for b in boxes:
            a = ray.get(b[0])
            acc = a.copy() if acc is None else np.add(acc, a, out=acc)
        return [ray.put(acc)] if put_result else float(acc[-1])

    def ready(self):
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--hosts", type=int, required=True)
    ap.add_argument("--op", required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--gap-ms", type=int, default=20)
    a = ap.parse_args()
    ray.init(address=a.address, logging_level="ERROR", log_to_driver=False)
    hosts = [Host.options(resources={"h%d" % i: 1}).remote() for i in range(a.hosts)]
    ray.get([h.ready.remote() for h in hosts])
    for tok in a.sizes.split(","):
        size = parse_bytes(tok)
        iters = 50 if size <= 64 << 10 else 10 if size <= 1 << 20 else 3 if size <= 64 << 20 else 1
        warm = 1 if size <= 64 << 20 else 0
        times = []
        for it in range(warm + iters):
            if a.op == "bcast":
                boxes = [ray.get(hosts[0].put.remote(size))]
            else:
                boxes = ray.get([h.put.remote(size) for h in hosts])
            t0 = time.perf_counter()
            if a.op == "bcast":
                ray.get([h.get.remote(boxes[0]) for h in hosts[1:]])
            elif a.op == "gather":
                ray.get(hosts[0].get_all.remote(boxes[1:]))
            elif a.op == "reduce":
                ray.get(hosts[0].reduce_all.remote(boxes, False))
            elif a.op == "allreduce":
                result = ray.get(hosts[0].reduce_all.remote(boxes, True))
                ray.get([h.get.remote(result) for h in hosts[1:]])
            if it >= warm:
                times.append((time.perf_counter() - t0) * 1e3)
            del boxes
            time.sleep(max(0, a.gap_ms) * (15 if size >= 64 << 20 else 1) / 1e3)
        times.sort()
        print("%s %d %d %d %.3f %.3f" % (a.op, a.hosts, size, iters, times[len(times) // 2], times[0]), flush=True)


if __name__ == "__main__":
    main()
