"""Starts the ranks of a one-machine torch.distributed job as separate processes.

Each rank is `python3 SCRIPT ARGS...` with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT set (a free local port), and LD_PRELOAD=shim when one is given: a preload must
be in the environment a process starts with. With CONDUIT_SOCKETS (a comma list of conduitd
sockets, one daemon per "host"), the ranks are split between them in order, each rank's
CONDUIT_SOCKET its share's: daemons on one machine standing for hosts (tools/gpu-check,
step 7). Shared by the scripts of tools/gpu/.
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, world, port, shim="", **extra):
    """The environment of one rank: torch.distributed's variables, the preload, `extra`."""
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1", **extra)
    if shim:
        env["LD_PRELOAD"] = os.path.abspath(shim)
    sockets = [s for s in os.environ.get("CONDUIT_SOCKETS", "").split(",") if s]
    if sockets:
        env["CONDUIT_SOCKET"] = sockets[rank * len(sockets) // world]
    return env


def run_ranks(name, world, script, args, shim="", timeout=180):
    """Runs `world` ranks of `script` with `args`; 0 when every rank exits 0 in time."""
    port = free_port()
    procs = []
    for rank in range(world):
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(script)] + list(args),
                                      env=rank_env(rank, world, port, shim)))
    deadline = time.time() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1, deadline - time.time())))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            print("%s: world %d timed out after %d s" % (name, world, timeout))
            return 1
    if any(codes):
        print("%s: world %d: rank exit codes %s" % (name, world, codes))
        return 1
    return 0


def job_arguments(doc, timeout, add=None):
    """The arguments of a script started by run_ranks: --world, --shim, --timeout, and --worker
    for the ranks themselves; `add(parser)` adds the script's own."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--shim", default="", help="libnccl.so.2 to LD_PRELOAD into every rank")
    p.add_argument("--timeout", type=int, default=timeout)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    if add is not None:
        add(p)
    return p.parse_args()
