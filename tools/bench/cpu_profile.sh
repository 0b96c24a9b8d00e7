#!/usr/bin/env bash
# Where a collective's CPU goes, ours against OpenMPI: one size in a loop on the same
# namespaces, `perf record -a` for a few seconds during each, then the machine's CPU time
# per call (us) by category (socket copies, wake-ups, scheduling, staging copies, reduction,
# idle), side by side. What a benchmark table cannot say: on a host whose CPUs are all busy
# (the emulated hosts share this machine's), the faster implementation is the one that
# spends less CPU per call, and this says on what.
#
# usage: cpu_profile.sh [--coll allreduce|allgather|reducescatter|broadcast] [--hosts 4] [--ppn 1] [--size 4M] [--seconds 2]
#                       [--rate 40gbit] [--mem-alloc] [--systems "conduit mpi"]
#                       [--prefix cpf] [--subnet 10.76.0] [--keep-work]
# A system whose ranks spin while they wait (OpenMPI's do) shows no idle time: its busy
# time includes the spinning (in "other user", "context switches" and "other kernel").
# Each system first runs a few calls to learn its time per call, then enough calls to
# outlast the recording, which starts 3 s into the run, once the loop is running. CPU per
# call = the category's share of the samples x CPUs x the time per call the run reports.
# --mem-alloc: ours in ncclMemAlloc buffers (conduit-perf -R 1).
# --systems: any of conduit, mpi, gloo (torch.distributed's Gloo, the best peer for large
# all-reduces on 2 hosts), in that order of the columns.
# Needs perf (linux-perf); for OpenMPI mpicc and mpirun; for Gloo python3 with torch.
set -euo pipefail

COLL=allreduce HOSTS=4 PPN=1 SIZE=4M SECONDS_=2 RATE=40gbit MEM_ALLOC=0 SYSTEMS="conduit mpi" KEEP=0
export BENCH_PREFIX=${BENCH_PREFIX:-cpf} BENCH_SUBNET=${BENCH_SUBNET:-10.76.0}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --coll) COLL=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --ppn) PPN=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --mem-alloc) MEM_ALLOC=1; shift ;;
    --systems) SYSTEMS=$2; shift 2 ;;
    --prefix) BENCH_PREFIX=$2; shift 2 ;;
    --subnet) BENCH_SUBNET=$2; shift 2 ;;
    --keep-work) KEEP=1; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cpu_profile.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
case "$COLL" in
  allreduce) PERF_COLL=all_reduce MPI_COLL=allreduce ;;
  allgather) PERF_COLL=all_gather MPI_COLL=allgather ;;
  reducescatter) PERF_COLL=reduce_scatter MPI_COLL=reducescatter ;;
  # In place, as the peers' (allreduce_bench.sh): ours is recorded in conduit-perf's
  # in-place column, which follows the out-of-place one.
  broadcast) PERF_COLL=broadcast MPI_COLL=broadcast
    export BENCH_PERF_IN_PLACE=1 ;;
  *) echo "cpu_profile.sh: --coll must be allreduce, allgather, reducescatter or broadcast" >&2; exit 2 ;;
esac
[[ $SECONDS_ =~ ^[1-9][0-9]*$ ]] || { echo "cpu_profile.sh: --seconds must be a whole number >= 1" >&2; exit 2; }

BENCH_WORK=$(mktemp -d /tmp/conduit-cpu.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
command -v perf >/dev/null || bench_die "perf not found (apt-get install linux-perf)"

cleanup() {
  bench_conduit_stop
  bench_cluster_down
  if ((KEEP)); then echo "# work dir kept: $BENCH_WORK" >&2; else rm -rf "$BENCH_WORK"; fi
}
trap cleanup EXIT

# time_of FILE: the time column (us) of the one result line a run printed.
time_of() { awk '!/^#/ && NF >= 3 { t = $3 } END { if (t == "") exit 1; print t }' "$1"; }
# The recording starts this long after the run, past its start-up (mpirun starts its ranks
# through ssh-like agents in about a second; a window that took in start-up would charge its
# CPU to the calls).
LEAD=3
# Python imports torch for seconds before Gloo's first call: its recording starts later.
GLOO_LEAD=6
# calls_for US [LEAD]: calls that outlast a recording that starts LEAD s in, with a margin of 2 s.
calls_for() { awk -v us="$1" -v s="$SECONDS_" -v lead="${2:-$LEAD}" 'BEGIN { n = int((lead + s + 2) * 1e6 / us) + 1; print (n < 20 ? 20 : n) }'; }

# record NAME [LEAD]: perf record -a into $BENCH_WORK/NAME.data while the loop started last
# runs, from LEAD s after it started.
record() {
  sleep "${2:-$LEAD}"
  perf record -a -F 2000 -o "$BENCH_WORK/$1.data" -- sleep "$SECONDS_" >/dev/null 2>>"$BENCH_WORK/perf.log"
}

bench_cluster_up "$HOSTS" "$RATE"
TABLE_ARGS=()
PERF_EXTRA=(--coll "$PERF_COLL")
((MEM_ALLOC)) && PERF_EXTRA+=(-R 1)
for system in $SYSTEMS; do
  case "$system" in
    conduit)
      bench_conduit_available || bench_die "build/bin/conduitd or conduit-perf missing (cmake --build build)"
      bench_conduit_start "$HOSTS"
      bench_conduit_perf "$HOSTS" "$PPN" "${PERF_EXTRA[@]}" -b "$SIZE" -e "$SIZE" -n 10 -w 3 -c 0 >"$BENCH_WORK/conduit-probe.out"
      n=$(calls_for "$(time_of "$BENCH_WORK/conduit-probe.out")")
      # conduit-perf runs the out-of-place column, then the in-place one: the recording
      # falls within the first, or (BENCH_PERF_IN_PLACE=1) starts once the first should be
      # over by the probe's time for it. The probe runs slower than the loop (its calls are
      # the first), so the in-place column gets twice the calls, outlasting the recording
      # even when it starts that much too late.
      lead=$LEAD
      if [[ ${BENCH_PERF_IN_PLACE:-0} == 1 ]]; then
        n=$((2 * n))
        lead=$(awk -v us="$(bench_perf_rows "$BENCH_WORK/perf-rank0.out" out | awk '{ t = $3 } END { print t }')" \
          -v n="$n" 'BEGIN { printf "%d", 2 + n * us / 1e6 }')
      fi
      bench_conduit_perf "$HOSTS" "$PPN" "${PERF_EXTRA[@]}" -b "$SIZE" -e "$SIZE" -n "$n" -w 3 -c 0 >"$BENCH_WORK/conduit.out" &
      job=$!
      record conduit "$lead"
      wait "$job" || bench_die "conduit-perf failed (logs in $BENCH_WORK)"
      bench_conduit_stop
      label=ours$( ((MEM_ALLOC)) && echo ", ncclMemAlloc" || echo ", staged")
      TABLE_ARGS+=("$label=$BENCH_WORK/conduit.data:$(time_of "$BENCH_WORK/conduit.out")")
      ;;
    mpi)
      for tool in mpicc mpirun; do command -v "$tool" >/dev/null || bench_die "$tool not found"; done
      bin=$(bench_mpi_build "$BENCH_DIR/mpi_allreduce_bench.c")
      bench_mpi_run "$HOSTS" "$PPN" "$bin" -c "$MPI_COLL" -b "$SIZE" -e "$SIZE" -n 10 -w 3 -T 0 >"$BENCH_WORK/mpi-probe.out"
      n=$(calls_for "$(time_of "$BENCH_WORK/mpi-probe.out")")
      bench_mpi_run "$HOSTS" "$PPN" "$bin" -c "$MPI_COLL" -b "$SIZE" -e "$SIZE" -n "$n" -w 3 -T 0 >"$BENCH_WORK/mpi.out" &
      job=$!
      record mpi
      wait "$job" || bench_die "OpenMPI run failed (logs in $BENCH_WORK)"
      TABLE_ARGS+=("OpenMPI=$BENCH_WORK/mpi.data:$(time_of "$BENCH_WORK/mpi.out")")
      ;;
    gloo)
      bench_need_gloo
      gloo_args=(--coll "$COLL" -b "$SIZE" -e "$SIZE" -w 3 -T 0)
      bench_gloo_run "$HOSTS" "$PPN" "$BENCH_DIR/gloo_allreduce_bench.py" "${gloo_args[@]}" -n 10 >"$BENCH_WORK/gloo-probe.out" ||
        bench_die "Gloo run failed (logs in $BENCH_WORK)"
      n=$(calls_for "$(time_of "$BENCH_WORK/gloo-probe.out")" "$GLOO_LEAD")
      bench_gloo_run "$HOSTS" "$PPN" "$BENCH_DIR/gloo_allreduce_bench.py" "${gloo_args[@]}" -n "$n" >"$BENCH_WORK/gloo.out" &
      job=$!
      record gloo "$GLOO_LEAD"
      wait "$job" || bench_die "Gloo run failed (logs in $BENCH_WORK)"
      TABLE_ARGS+=("Gloo=$BENCH_WORK/gloo.data:$(time_of "$BENCH_WORK/gloo.out")")
      ;;
    *) bench_die "unknown system '$system' (conduit, mpi, gloo)" ;;
  esac
done

echo "## $COLL of $SIZE, $HOSTS hosts x $PPN ranks, links $RATE: us of CPU per call ($(nproc) CPUs, ${SECONDS_} s recorded)"
echo
"$BENCH_PY" "$BENCH_DIR/cpu_profile_table.py" --cpus "$(nproc)" "${TABLE_ARGS[@]}"
