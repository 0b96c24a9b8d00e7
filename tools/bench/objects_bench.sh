#!/usr/bin/env bash
# Object store collectives: Conduit's libhoplite vs OpenMPI vs Gloo (PyTorch CPU) vs Ray's
# object store, and the lower bound, on the same namespaces and tc-shaped links.
#
# usage: objects_bench.sh [--hosts "4 8"] [--rate 1gbit] [--sizes 1K,64K,1M,16M,64M,256M,1G]
#                         [--ops "bcast gather reduce allreduce"] [--systems "hoplite mpi gloo ray"]
#                         [--max-gather 256M] [--max-large-hosts 8:256M] [--block 262144]
#                         [--prefix obn] [--subnet 10.86.0] [--out FILE] [--keep-work]
#                         [--shmem-thp never|advise|...] [--gap-ms 20]
# For each host count: fresh namespaces with every link shaped to --rate, iperf3 for the
# real link rate, then every (op, system) one after another (never concurrently). Sizes
# above --max-gather are skipped for gather ((n-1) x size through one link), and
# "--max-large-hosts H:SIZE" caps the sizes on H hosts (memory: every host's copy lives on
# this one machine). Lower bounds from the iperf3 rate B: bcast S/B, gather (n-1)S/B,
# reduce S/B, allreduce 2(n-1)/n S/B. "All-links time": the bytes that must cross some link
# (bcast, gather and reduce (n-1)S, allreduce 2(n-1)S) at the rate R iperf3 measures with
# every host sending to the next at once; on one machine the hosts share its CPUs, so that
# is about the best any system does there. Ray is installed into $RAY_VENV (default
# /var/tmp/conduit-ray-venv) on first use with `pip install ray`. --shmem-thp sets the host's
# /sys/kernel/mm/transparent_hugepage/shmem_enabled for the run (restored afterwards; the
# table says which was in force): conduitd asks for huge pages for large copies, which
# only `advise` (or a wider mode) grants (docs/configuration.md). --gap-ms G: every system's
# hosts are idle G ms before each timed run (15 G from 64 MiB, for the last run's memory to be
# freed), default 20: on a VM a CPU that was idle for milliseconds runs its first tens of
# microseconds far slower (docs/benchmarks.md, "Idle before each run"), so a system timed back
# to back would be measured warm and the others cold.
set -euo pipefail

HOSTS_LIST="4 8" RATE=1gbit SIZES=1K,64K,1M,16M,64M,256M,1G OPS="bcast gather reduce allreduce"
SYSTEMS="hoplite mpi gloo ray" MAX_GATHER=256M MAX_LARGE="8:256M" BLOCK=262144 OUT= KEEP=0 SHMEM_THP= GAP_MS=20
export BENCH_PREFIX=${BENCH_PREFIX:-obn} BENCH_SUBNET=${BENCH_SUBNET:-10.86.0}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) HOSTS_LIST=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --ops) OPS=$2; shift 2 ;;
    --systems) SYSTEMS=$2; shift 2 ;;
    --max-gather) MAX_GATHER=$2; shift 2 ;;
    --max-large-hosts) MAX_LARGE=$2; shift 2 ;;
    --block) BLOCK=$2; shift 2 ;;
    --prefix) BENCH_PREFIX=$2; shift 2 ;;
    --subnet) BENCH_SUBNET=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --keep-work) KEEP=1; shift ;;
    --shmem-thp) SHMEM_THP=$2; shift 2 ;;
    --gap-ms) GAP_MS=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "objects_bench.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

BENCH_WORK=$(mktemp -d /tmp/conduit-objbench.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
[[ -x $BENCH_BUILD/bin/conduitd && -x $BENCH_BUILD/bin/hoplite-bench ]] ||
  bench_die "build conduitd and hoplite-bench first (cmake --build build)"
RAY_VENV=${RAY_VENV:-/var/tmp/conduit-ray-venv}
THP_FILE=/sys/kernel/mm/transparent_hugepage/shmem_enabled
thp_mode() { sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP_FILE" 2>/dev/null || true; }  # the bracketed one
THP_BEFORE=$(thp_mode)
if [[ -n $SHMEM_THP ]]; then
  echo "$SHMEM_THP" >"$THP_FILE" || bench_die "cannot set $THP_FILE to '$SHMEM_THP'"
fi
THP_NOW=$(thp_mode)

bytes_of() { "$BENCH_PY" -c 'import sys
s=sys.argv[1]; m={"k":1<<10,"m":1<<20,"g":1<<30}.get(s[-1].lower(),1)
print(int(float(s[:-1] if m>1 else s)*m))' "$1"; }
# sizes_for OP HOSTS: the size list with the caps applied.
sizes_for() {
  local op=$1 hosts=$2 cap="" out="" s
  [[ $op == gather ]] && cap=$(bytes_of "$MAX_GATHER")
  if [[ ${MAX_LARGE%%:*} == "$hosts" ]]; then
    local c; c=$(bytes_of "${MAX_LARGE#*:}")
    [[ -z $cap || $c -lt $cap ]] && cap=$c
  fi
  for s in ${SIZES//,/ }; do
    [[ -n $cap && $(bytes_of "$s") -gt $cap ]] && continue
    out+="${out:+,}$s"
  done
  echo "$out"
}

ray_stop() {
  # Only processes inside our own namespaces: everything Ray started there.
  local i pass
  for pass in TERM KILL; do
    for ((i = 0; i < ${1:-8}; i++)); do ip netns pids "$(bench_ns "$i")" 2>/dev/null | xargs -r kill -s "$pass" 2>/dev/null || true; done
    sleep 1
  done
}

ray_start() {
  local hosts=$1 i mem=$2
  ip netns exec "$(bench_ns 0)" "$RAY_VENV/bin/ray" start --head --node-ip-address="$(bench_ip 0)" --port=6379 \
    --num-cpus=1 --resources='{"h0":1}' --object-store-memory="$mem" --include-dashboard=false \
    --disable-usage-stats >"$BENCH_WORK/ray-h0.log" 2>&1 || return 1
  for ((i = 1; i < hosts; i++)); do
    ip netns exec "$(bench_ns "$i")" "$RAY_VENV/bin/ray" start --address="$(bench_ip 0):6379" \
      --node-ip-address="$(bench_ip "$i")" --num-cpus=1 --resources="{\"h$i\":1}" --object-store-memory="$mem" \
      --disable-usage-stats >"$BENCH_WORK/ray-h$i.log" 2>&1 || return 1
  done
}

cleanup() {
  if [[ -n $SHMEM_THP && -n $THP_BEFORE ]]; then echo "$THP_BEFORE" >"$THP_FILE" || true; fi
  bench_conduit_stop
  ray_stop 8
  bench_cluster_down
  if ((KEEP)); then echo "# work dir kept: $BENCH_WORK" >&2; else rm -rf "$BENCH_WORK"; fi
}
trap cleanup EXIT

if [[ " $SYSTEMS " == *" mpi "* ]]; then MPI_BIN=$(bench_mpi_build "$BENCH_DIR/mpi_objects_bench.c"); fi
if [[ " $SYSTEMS " == *" ray "* && ! -x $RAY_VENV/bin/ray ]]; then
  bench_log "installing ray into $RAY_VENV"
  "$BENCH_PY" -m venv --system-site-packages "$RAY_VENV" && "$RAY_VENV/bin/pip" install -q ray ||
    bench_die "could not install ray into $RAY_VENV"
fi

bench_log "machine: $(bench_machine)"
RES="$BENCH_WORK/results"
mkdir -p "$RES"
for H in $HOSTS_LIST; do
  bench_log "$H hosts, links shaped to $RATE"
  bench_cluster_up "$H" "$RATE"
  bench_iperf >"$RES/$H.link"
  bench_log "iperf3 h0->h1: $(cat "$RES/$H.link") Gbit/s"
  bench_iperf_ring "$H" >"$RES/$H.ring"
  bench_log "iperf3, every host to the next at once: $(cat "$RES/$H.ring") Gbit/s in all"
  peers=""
  for ((i = 0; i < H; i++)); do peers+="${peers:+,}$(bench_ip "$i"):7650"; done
  sockets=""
  for ((i = 0; i < H; i++)); do sockets+="${sockets:+,}$BENCH_WORK/h$i.sock"; done
  for sys in $SYSTEMS; do
    case $sys in
      hoplite)
        bench_conduit_start "$H" --object-peers "$peers" --object-block-bytes "$BLOCK" --log-level warn \
          --object-memory-bytes $((20 << 30))
        sleep 2  # the daemons find each other (control connections, ring)
        for op in $OPS; do
          bench_log "hoplite $op"
          "$BENCH_BUILD/bin/hoplite-bench" --sockets "$sockets" --op "$op" --sizes "$(sizes_for "$op" "$H")" \
            --gap-ms "$GAP_MS" >>"$RES/$H.hoplite" 2>>"$BENCH_WORK/hoplite.log" || bench_log "hoplite $op failed (see $BENCH_WORK/hoplite.log)"
        done
        bench_conduit_stop ;;
      mpi)
        for op in $OPS; do
          bench_log "openmpi $op"
          # mpirun's launch over netns-rsh occasionally fails to route; one retry.
          bench_mpi_run "$H" 1 "$MPI_BIN" "$op" "$(sizes_for "$op" "$H")" "$GAP_MS" >"$BENCH_WORK/mpi.out" ||
            bench_mpi_run "$H" 1 "$MPI_BIN" "$op" "$(sizes_for "$op" "$H")" "$GAP_MS" >"$BENCH_WORK/mpi.out" ||
            bench_log "mpirun $op failed (log: $BENCH_WORK/mpi.log)"
          grep "^$op " "$BENCH_WORK/mpi.out" >>"$RES/$H.mpi" || true
        done ;;
      gloo)
        for op in $OPS; do
          bench_log "gloo $op"
          bench_gloo_run "$H" 1 "$BENCH_DIR/gloo_objects_bench.py" --op "$op" --sizes "$(sizes_for "$op" "$H")" \
            --gap-ms "$GAP_MS" \
            >>"$RES/$H.gloo" || bench_log "gloo $op failed (logs in $BENCH_WORK)"
        done ;;
      ray)
        if ray_start "$H" $((3 << 30)); then
          for op in $OPS; do
            bench_log "ray $op"
            ip netns exec "$(bench_ns 0)" timeout 1800 "$RAY_VENV/bin/python" "$BENCH_DIR/ray_objects_bench.py" \
              --address "$(bench_ip 0):6379" --hosts "$H" --op "$op" --sizes "$(sizes_for "$op" "$H")" --gap-ms "$GAP_MS" \
              >>"$RES/$H.ray" 2>>"$BENCH_WORK/ray-driver.log" || bench_log "ray $op failed (see $BENCH_WORK/ray-driver.log)"
          done
        else
          bench_log "ray start failed (see $BENCH_WORK/ray-h*.log)"
        fi
        ray_stop "$H" ;;
      *) bench_die "unknown system $sys" ;;
    esac
  done
  bench_cluster_down
done

"$BENCH_PY" "$BENCH_DIR/objects_table.py" --results "$RES" --hosts "$HOSTS_LIST" --ops "$OPS" \
  --systems "$SYSTEMS" --rate "$RATE" --shmem-thp "$THP_NOW" --gap-ms "$GAP_MS" ${OUT:+--out "$OUT"}
