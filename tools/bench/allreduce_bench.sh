#!/usr/bin/env bash
# Allreduce (or --coll allgather|reducescatter|broadcast|reduce|alltoall): Conduit vs Gloo vs OpenMPI on the
# same namespaces. Sizes as nccl-tests counts them: the whole buffer.
#
# usage: allreduce_bench.sh [--coll allreduce] [--modes "shaped fast loaded"] [--ppn "1 2 4"]
#                           [--hosts "2 4"] [-b 1K] [-e 256M] [-f 4] [--rate 1gbit] [--load N]
#                           [-n 20] [-w 5] [-T 2] [--bidir] [--prefix cbn] [--subnet 10.79.0]
#                           [--mem-alloc | --adopt] [--pin-hosts] [--dtype float] [--out FILE] [--keep-work]
# Modes: shaped (links shaped to --rate), fast (links left fast: 40gbit is above what a veth
# carries), loaded (fast, with N busy processes running through all three implementations,
# default half the cores: the same CPU load for each). For each mode, ranks per host and
# host count: bring up the cluster, measure the link with iperf3 (before any load), run the
# three implementations one after the other (never concurrently, they share the links and
# the CPU), tear down. Then print one side-by-side table per mode and ranks per host
# (markdown), also written to --out. "ours" is skipped with a message when build/bin/conduitd
# or build/bin/conduit-perf is missing. --mem-alloc: ours allocates its buffers with
# ncclMemAlloc (conduit-perf -R 1, as nccl-tests -R), which Conduit's host path shares with
# the daemon (no staging copies); the baselines use their own buffers as always. --adopt:
# ours runs with CONDUIT_ADOPT_HOST_BUFFERS=1, its own buffers' pages made shared memory at
# their first use (docs/shim-protocol.md, "A program's own buffers, adopted").
# "all-links time" (us): the bytes that must cross links between hosts (2(n-1)/n of the
# buffer per host for an all-reduce, (n-1)/n for the others, (n-1)/n of each rank's buffer for an
# all-to-all), at the rate iperf3 measures
# with every host sending to the next at once. On one machine the namespaces share its
# CPUs, so that is about the best any algorithm does there (lib.sh, bench_iperf_ring).
# --pin-hosts: every process of host i (daemon, programs, the peers' ranks, iperf3) on CPU
# i mod the machine's CPUs (lib.sh, bench_on, BENCH_CPUS), for all three alike.
# --dtype float|half|bfloat16: the element type (float32 by default). MPI has no 16-bit
# float type, so OpenMPI runs only for float; Gloo runs what its torch supports (Debian
# 12's torch 1.13 has no bfloat16 in Gloo: its column stays empty, with a log line).
# "ours B/B": the bytes host 0's conduitd counted written to memory per payload byte
# (programs' staging copies, local copies, reductions, socket sends and receives;
# docs/design.md), from one untimed call per size after the timed run.
set -euo pipefail

COLL=allreduce MODES="shaped fast loaded" HOSTS_LIST="2 4" PPN_LIST="1 2 4" LOAD=$(( ($(nproc) + 1) / 2 )) MIN=1K MAX=256M FACTOR=4 RATE=1gbit ITERS=20 WARMUP=5 BUDGET=2
BIDIR=0 OUT= KEEP=0 MEM_ALLOC=0 ADOPT=0 DTYPE=float
export BENCH_PREFIX=${BENCH_PREFIX:-cbn} BENCH_SUBNET=${BENCH_SUBNET:-10.79.0}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --coll) COLL=$2; shift 2 ;;
    --hosts) HOSTS_LIST=$2; shift 2 ;;
    --ppn) PPN_LIST=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --load) LOAD=$2; shift 2 ;;
    -b) MIN=$2; shift 2 ;;
    -e) MAX=$2; shift 2 ;;
    -f) FACTOR=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    -w) WARMUP=$2; shift 2 ;;
    -T) BUDGET=$2; shift 2 ;;
    --bidir) BIDIR=1; shift ;;
    --prefix) BENCH_PREFIX=$2; shift 2 ;;
    --subnet) BENCH_SUBNET=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --keep-work) KEEP=1; shift ;;
    --mem-alloc) MEM_ALLOC=1; shift ;;
    --adopt) ADOPT=1; shift ;;
    --pin-hosts) export BENCH_PIN_HOSTS=1; shift ;;
    --dtype) DTYPE=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "allreduce_bench.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

case "$DTYPE" in
  float) GLOO_DTYPE=float32 ;;
  half) GLOO_DTYPE=float16 ;;
  bfloat16) GLOO_DTYPE=bfloat16 ;;
  *) echo "allreduce_bench.sh: --dtype must be float, half or bfloat16" >&2; exit 2 ;;
esac
case "$COLL" in
  allreduce) PERF_COLL=all_reduce TITLE="allreduce ($DTYPE sum)" ;;
  allgather) PERF_COLL=all_gather TITLE="allgather ($DTYPE)" ;;
  reducescatter) PERF_COLL=reduce_scatter TITLE="reducescatter ($DTYPE sum)" ;;
  # MPI_Bcast and torch's broadcast work in place (the root's buffer is its input and its
  # output): ours is timed in place too, conduit-perf's in-place column (out of place, the
  # root also copies its input into its output, which the peers never do).
  broadcast) PERF_COLL=broadcast TITLE="broadcast ($DTYPE, root 0, in place as the peers')"
    export BENCH_PERF_IN_PLACE=1 ;;
  reduce) PERF_COLL=reduce TITLE="reduce ($DTYPE sum, root 0)" ;;
  alltoall) PERF_COLL=alltoall TITLE="alltoall ($DTYPE)" ;;
  *) echo "allreduce_bench.sh: --coll must be allreduce, allgather, reducescatter, broadcast, reduce or alltoall" >&2; exit 2 ;;
esac

BENCH_WORK=$(mktemp -d /tmp/conduit-bench.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
for tool in iperf3 mpirun mpicc "$BENCH_PY"; do command -v "$tool" >/dev/null || bench_die "$tool not found"; done
bench_need_gloo

LOAD_PIDS=()
load_start() {
  local i
  for ((i = 0; i < LOAD; i++)); do
    bash -c 'while :; do :; done' &
    LOAD_PIDS+=($!)
  done
}
load_stop() {
  ((${#LOAD_PIDS[@]})) && kill "${LOAD_PIDS[@]}" 2>/dev/null && wait "${LOAD_PIDS[@]}" 2>/dev/null
  LOAD_PIDS=()
}

cleanup() {
  load_stop || true
  bench_conduit_stop
  bench_cluster_down
  if ((KEEP)); then echo "# work dir kept: $BENCH_WORK" >&2; else rm -rf "$BENCH_WORK"; fi
}
trap cleanup EXIT

SIZE_ARGS=(-b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -T "$BUDGET")
GLOO_ARGS=(--coll "$COLL" --dtype "$GLOO_DTYPE" "${SIZE_ARGS[@]}")
MPI_ARGS=(-c "$COLL" "${SIZE_ARGS[@]}")
# conduit-perf takes nccl-tests' flags: -T there is a timeout, so the budget is
# --time-budget; -a 3 reports the slowest rank's time, as the two baselines do.
PERF_ARGS=(--coll "$PERF_COLL" -d "$DTYPE" -o sum -b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" --time-budget "$BUDGET" -a 3)
if ((MEM_ALLOC)); then PERF_ARGS+=(-R 1); TITLE="$TITLE, ours on ncclMemAlloc buffers"; fi
# The peers' programs ignore the variable; conduit-perf's shim reads it.
if ((ADOPT)); then export CONDUIT_ADOPT_HOST_BUFFERS=1; TITLE="$TITLE, ours on its own buffers adopted"; fi
if [[ ${BENCH_PIN_HOSTS:-0} == 1 ]]; then TITLE="$TITLE, each host's processes on one CPU"; fi
MPI_BIN=$(bench_mpi_build "$BENCH_DIR/mpi_allreduce_bench.c")
if bench_conduit_available; then HAVE_OURS=1; else
  HAVE_OURS=0
  bench_log "ours: SKIPPED: $BENCH_BUILD/bin/conduitd or conduit-perf not built (cmake --build build)"
fi
bench_log "machine: $(bench_machine)"
if ((BIDIR)) && ! bench_iperf_has_bidir; then bench_log "iperf3 has no --bidir; skipping"; BIDIR=0; fi

# One host count in one mode: link, then the three implementations; results in $1.
run_hosts() {
  local res=$1 H=$2 PPN=$3 rate=$4 loaded=$5
  bench_log "$H hosts x $PPN ranks, links shaped to $rate$( ((loaded)) && echo ", $LOAD busy processes")"
  bench_cluster_up "$H" "$rate"
  bench_iperf >"$res/$H.link"
  bench_log "iperf3 h0->h1: $(cat "$res/$H.link") Gbit/s"
  bench_iperf_ring "$H" >"$res/$H.ring"
  bench_log "iperf3, every host to the next at once: $(cat "$res/$H.ring") Gbit/s in all"
  if ((BIDIR)); then
    bench_iperf --bidir >"$res/$H.link-bidir"
    bench_log "iperf3 --bidir (min direction): $(cat "$res/$H.link-bidir") Gbit/s"
  fi
  ((loaded)) && load_start
  if ((HAVE_OURS)); then
    bench_log "ours (conduit-perf)"
    bench_conduit_start "$H"
    bench_conduit_perf "$H" "$PPN" "${PERF_ARGS[@]}" >"$res/$H.ours" ||
      bench_log "conduit-perf failed or found wrong results (logs in $BENCH_WORK)"
    bench_log "ours: bytes written per payload byte (one untimed call per size)"
    bench_conduit_copies "$H" "$PPN" "${PERF_ARGS[@]}" >"$res/$H.copies"
    bench_conduit_stop
  fi
  bench_log "gloo"
  bench_gloo_run "$H" "$PPN" "$BENCH_DIR/gloo_allreduce_bench.py" "${GLOO_ARGS[@]}" >"$res/$H.gloo" ||
    bench_log "gloo run failed (logs in $BENCH_WORK)"
  if [[ $DTYPE == float ]]; then
    bench_log "openmpi"
    bench_mpi_run "$H" "$PPN" "$MPI_BIN" "${MPI_ARGS[@]}" >"$res/$H.mpi" ||
      bench_log "mpirun failed (log: $BENCH_WORK/mpi.log)"
  else
    bench_log "openmpi: skipped (MPI has no $DTYPE type)"
  fi
  load_stop || true
  bench_cluster_down
}

TABLES=()
for MODE in $MODES; do
  case "$MODE" in
    shaped) rate=$RATE loaded=0 label="links $RATE" ;;
    fast) rate=40gbit loaded=0 label="links left fast" ;;
    loaded) rate=40gbit loaded=1 label="links left fast, $LOAD busy processes" ;;
    *) bench_die "unknown mode '$MODE' (shaped, fast, loaded)" ;;
  esac
  for PPN in $PPN_LIST; do
    res="$BENCH_WORK/results-$MODE-$PPN"
    mkdir -p "$res"
    for H in $HOSTS_LIST; do run_hosts "$res" "$H" "$PPN" "$rate" "$loaded"; done
    TABLES+=("$("$BENCH_PY" "$BENCH_DIR/bench_table.py" --results "$res" --hosts "$HOSTS_LIST" --ppn "$PPN" \
      --rate "$label" --coll "$COLL" --title "$TITLE")")
  done
done
printf '%s\n\n' "${TABLES[@]}" | tee ${OUT:+"$OUT"}
