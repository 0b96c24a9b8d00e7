#!/usr/bin/env bash
# Allreduce (or --coll allgather|reducescatter|broadcast): Conduit vs Gloo vs OpenMPI on the
# same namespaces and shaped links. Sizes as nccl-tests counts them: the whole buffer.
#
# usage: allreduce_bench.sh [--coll allreduce] [--hosts "2 4"] [--ppn R] [-b 1K] [-e 256M]
#                           [-f 4] [--rate 1gbit] [-n 20] [-w 5] [-T 2] [--bidir]
#                           [--prefix cbn] [--subnet 10.79.0] [--out FILE] [--keep-work]
# For each host count: bring up the cluster, measure the link with iperf3, run the
# three implementations one after the other (never concurrently, they share the
# links and the CPU), tear down. Then print one side-by-side table (markdown),
# also written to --out. "ours" is skipped with a message when build/bin/conduitd
# or build/bin/conduit-perf is missing.
set -euo pipefail

COLL=allreduce HOSTS_LIST="2 4" PPN=1 MIN=1K MAX=256M FACTOR=4 RATE=1gbit ITERS=20 WARMUP=5 BUDGET=2
BIDIR=0 OUT= KEEP=0
export BENCH_PREFIX=${BENCH_PREFIX:-cbn} BENCH_SUBNET=${BENCH_SUBNET:-10.79.0}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --coll) COLL=$2; shift 2 ;;
    --hosts) HOSTS_LIST=$2; shift 2 ;;
    --ppn) PPN=$2; shift 2 ;;
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
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "allreduce_bench.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

case "$COLL" in
  allreduce) PERF_COLL=all_reduce TITLE="allreduce (float sum)" ;;
  allgather) PERF_COLL=all_gather TITLE="allgather (float)" ;;
  reducescatter) PERF_COLL=reduce_scatter TITLE="reducescatter (float sum)" ;;
  broadcast) PERF_COLL=broadcast TITLE="broadcast (float, root 0)" ;;
  *) echo "allreduce_bench.sh: --coll must be allreduce, allgather, reducescatter or broadcast" >&2; exit 2 ;;
esac

BENCH_WORK=$(mktemp -d /tmp/conduit-bench.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
for tool in iperf3 mpirun mpicc "$BENCH_PY"; do command -v "$tool" >/dev/null || bench_die "$tool not found"; done
"$BENCH_PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
  bench_die "$BENCH_PY has no torch with gloo (apt-get install python3-torch)"

cleanup() {
  bench_conduit_stop
  bench_cluster_down
  if ((KEEP)); then echo "# work dir kept: $BENCH_WORK" >&2; else rm -rf "$BENCH_WORK"; fi
}
trap cleanup EXIT

SIZE_ARGS=(-b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -T "$BUDGET")
GLOO_ARGS=(--coll "$COLL" "${SIZE_ARGS[@]}")
MPI_ARGS=(-c "$COLL" "${SIZE_ARGS[@]}")
# conduit-perf takes nccl-tests' flags: -T there is a timeout, so the budget is
# --time-budget; -a 3 reports the slowest rank's time, as the two baselines do.
PERF_ARGS=(--coll "$PERF_COLL" -d float -o sum -b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" --time-budget "$BUDGET" -a 3)
MPI_BIN=$(bench_mpi_build "$BENCH_DIR/mpi_allreduce_bench.c")
if bench_conduit_available; then HAVE_OURS=1; else
  HAVE_OURS=0
  bench_log "ours: SKIPPED: $BENCH_BUILD/bin/conduitd or conduit-perf not built (cmake --build build)"
fi
if ((BIDIR)) && ! bench_iperf_has_bidir; then bench_log "iperf3 has no --bidir; skipping"; BIDIR=0; fi

RES="$BENCH_WORK/results"
mkdir -p "$RES"
for H in $HOSTS_LIST; do
  bench_log "$H hosts x $PPN ranks, links shaped to $RATE"
  bench_cluster_up "$H" "$RATE"
  bench_iperf >"$RES/$H.link"
  bench_log "iperf3 h0->h1: $(cat "$RES/$H.link") Gbit/s"
  if ((BIDIR)); then
    bench_iperf --bidir >"$RES/$H.link-bidir"
    bench_log "iperf3 --bidir (min direction): $(cat "$RES/$H.link-bidir") Gbit/s"
  fi
  if ((HAVE_OURS)); then
    bench_log "ours (conduit-perf)"
    bench_conduit_start "$H"
    bench_conduit_perf "$H" "$PPN" "${PERF_ARGS[@]}" >"$RES/$H.ours" ||
      bench_log "conduit-perf failed or found wrong results (logs in $BENCH_WORK)"
    bench_conduit_stop
  fi
  bench_log "gloo"
  bench_gloo_run "$H" "$PPN" "$BENCH_DIR/gloo_allreduce_bench.py" "${GLOO_ARGS[@]}" >"$RES/$H.gloo" ||
    bench_log "gloo run failed (logs in $BENCH_WORK)"
  bench_log "openmpi"
  bench_mpi_run "$H" "$PPN" "$MPI_BIN" "${MPI_ARGS[@]}" >"$RES/$H.mpi" ||
    bench_log "mpirun failed (log: $BENCH_WORK/mpi.log)"
  bench_cluster_down
done

"$BENCH_PY" "$BENCH_DIR/bench_table.py" --results "$RES" --hosts "$HOSTS_LIST" --ppn "$PPN" --rate "$RATE" \
  --coll "$COLL" --title "$TITLE" ${OUT:+--out "$OUT"}
