# Reusable pieces of the collective benchmarks (source this file; bash only).
#
# Every helper takes the cluster description from these variables, which the
# calling script sets once (defaults shown):
#   BENCH_PREFIX=cbn  BENCH_SUBNET=10.79.0  BENCH_WORK=<temp dir for sockets, logs, id files>
# BENCH_CONDUITD_FLAGS="--flag value ..." adds flags to every conduitd a script starts
# (e.g. "--peer-congestion host" to measure with the host's congestion control).
# BENCH_HOST_CONGESTION=cubic gives every socket in the namespaces CUBIC (bench_cluster_up).
# Helpers print machine-readable result lines "size_bytes count time_us algbw busbw wrong"
# on stdout and send everything else to logs under $BENCH_WORK.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_ROOT=$(cd "$BENCH_DIR/../.." && pwd)
BENCH_NETNS="$BENCH_ROOT/tools/netns/conduit-netns"
: "${BENCH_PREFIX:=cbn}" "${BENCH_SUBNET:=10.79.0}" "${BENCH_BUILD:=$BENCH_ROOT/build}"
: "${BENCH_PY:=/usr/bin/python3}"

bench_log() { echo "# [$(date +%T)] $*" >&2; }
# bench_machine: what the figures were taken on, for the log: CPUs, kernel, and the scheduler
# settings that move them (the namespaces' links and processes all share these CPUs; some
# VM kernels add a setting of their own, kernel.sched_vcpu_pack, docs/benchmarks.md).
bench_machine() {
  local line sysctl
  line="$(nproc) CPUs, kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for sysctl in sched_vcpu_pack sched_autogroup_enabled; do
    [[ -r /proc/sys/kernel/$sysctl ]] && line+=", kernel.$sysctl $(cat "/proc/sys/kernel/$sysctl")"
  done
  echo "$line"
}
bench_die() { echo "bench: error: $*" >&2; exit 1; }

bench_ip() { "$BENCH_NETNS" ip "$1" --subnet "$BENCH_SUBNET"; }
bench_ns() { echo "$BENCH_PREFIX-h$1"; }
# The machine's CPUs, counted once by the script the user started and handed down to every
# process it starts (exported): `nproc` counts only the CPUs a process may run on, so in a
# process already pinned to one CPU (mpirun's launch agent, netns-rsh) it says 1.
: "${BENCH_CPUS:=$(nproc)}"
export BENCH_CPUS
# bench_cpu_of HOST: the CPU a host's processes run on with BENCH_PIN_HOSTS=1.
bench_cpu_of() { echo $(($1 % BENCH_CPUS)); }
# bench_on HOST: sets BENCH_ON to the words that run a command in HOST's namespace:
# "${BENCH_ON[@]}" CMD... (a prefix, not a function, so that `$!` after a command started
# with `&` is the command's own pid). With BENCH_PIN_HOSTS=1 every process of a host
# (daemon, programs, the peers' ranks, iperf3) runs on one CPU, bench_cpu_of HOST, for
# every system alike: closer to hosts with CPUs of their own than the scheduler's free
# placement, which queues a woken receiver behind its sender (docs/benchmarks.md, "what
# the idle CPU is made of").
bench_on() {
  BENCH_ON=(ip netns exec "$(bench_ns "$1")")
  if [[ ${BENCH_PIN_HOSTS:-0} == 1 ]]; then BENCH_ON+=(taskset -c "$(bench_cpu_of "$1")"); fi
}

# bench_cluster_up HOSTS RATE: fresh namespaces and shaped links.
# BENCH_HOST_CONGESTION=NAME (e.g. cubic): every socket in the namespaces (the peers',
# iperf3's and the daemons' unless --peer-congestion says otherwise) gets NAME as its TCP
# congestion control: the "level field" of docs/benchmarks.md, whatever the host's default.
# A namespace may take a default only from the host's tcp_allowed_congestion_control, so
# NAME is added there for the run and the list restored by bench_cluster_down.
bench_cluster_up() {
  local sysctls=${CONDUIT_NETNS_SYSCTL:-}
  if [[ -n ${BENCH_HOST_CONGESTION:-} ]]; then
    local allowed; allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
    if [[ " $allowed " != *" $BENCH_HOST_CONGESTION "* ]]; then
      [[ -f $BENCH_WORK/allowed-congestion ]] || echo "$allowed" >"$BENCH_WORK/allowed-congestion"
      sysctl -q -w net.ipv4.tcp_allowed_congestion_control="$allowed $BENCH_HOST_CONGESTION" ||
        bench_die "cannot allow congestion control '$BENCH_HOST_CONGESTION' (is its module available?)"
    fi
    sysctls+=" net.ipv4.tcp_congestion_control=$BENCH_HOST_CONGESTION"
  fi
  CONDUIT_NETNS_SYSCTL=$sysctls \
    "$BENCH_NETNS" up --hosts "$1" --prefix "$BENCH_PREFIX" --subnet "$BENCH_SUBNET" --rate "$2"
}
bench_cluster_down() {
  "$BENCH_NETNS" down --prefix "$BENCH_PREFIX"
  if [[ -f ${BENCH_WORK:-/nonexistent}/allowed-congestion ]]; then
    sysctl -q -w net.ipv4.tcp_allowed_congestion_control="$(cat "$BENCH_WORK/allowed-congestion")"
    rm -f "$BENCH_WORK/allowed-congestion"
  fi
}

# bench_iperf [--bidir]: Gbit/s from h0 to h1 as the receiver saw it (5 s run).
# With --bidir both directions run at once and the lower of the two is printed,
# which is what a ring collective gets when every link carries both directions.
bench_iperf() {
  local bidir=${1:-} ip1 json
  ip1=$(bench_ip 1)
  bench_on 1
  "${BENCH_ON[@]}" iperf3 -s -1 -B "$ip1" >"$BENCH_WORK/iperf-server.log" 2>&1 &
  local server=$!
  sleep 0.5
  bench_on 0
  json=$("${BENCH_ON[@]}" iperf3 -c "$ip1" -t 5 -J $bidir 2>>"$BENCH_WORK/iperf-client.log") || {
    wait "$server" || true
    bench_die "iperf3 failed (see $BENCH_WORK/iperf-*.log)"
  }
  wait "$server" || true
  "$BENCH_PY" -c '
import json, sys
e = json.loads(sys.stdin.read())["end"]
rates = [e["sum_received"]["bits_per_second"]]
if "sum_received_bidir_reverse" in e:
    rates.append(e["sum_received_bidir_reverse"]["bits_per_second"])
print("%.3f" % (min(rates) / 1e9))' <<<"$json"
}

# bench_iperf_ring HOSTS: every host sends to the next (h0->h1, ..., h(n-1)->h0) at the same
# time for 5 s; prints the sum of what arrived, in Gbit/s. On separate machines that is n
# links' worth. Namespaces on one machine share its CPUs, and every byte a veth carries costs
# CPU on both sides, so this sum is about the most the machine moves between hosts at once:
# a collective that must move B bytes between hosts takes about B / this rate at best,
# whatever its algorithm (docs/benchmarks.md, "What all the links carry at once").
bench_iperf_ring() {
  local n=$1 i to failed=0 servers=() clients=() results=()
  for ((i = 0; i < n; i++)); do
    to=$(((i + 1) % n))
    bench_on "$to"
    "${BENCH_ON[@]}" iperf3 -s -1 -B "$(bench_ip "$to")" -p $((5301 + i)) \
      >"$BENCH_WORK/iperf-ring-server$i.log" 2>&1 &
    servers+=($!)
  done
  sleep 0.5
  for ((i = 0; i < n; i++)); do
    to=$(((i + 1) % n))
    results+=("$BENCH_WORK/iperf-ring$i.json")
    bench_on "$i"
    "${BENCH_ON[@]}" iperf3 -c "$(bench_ip "$to")" -p $((5301 + i)) -t 5 -J \
      >"${results[i]}" 2>>"$BENCH_WORK/iperf-client.log" &
    clients+=($!)
  done
  for i in "${clients[@]}"; do wait "$i" || failed=1; done
  for i in "${servers[@]}"; do wait "$i" || true; done
  ((failed == 0)) || bench_die "iperf3 (ring) failed (see $BENCH_WORK/iperf-*.log)"
  "$BENCH_PY" -c '
import json, sys
print("%.3f" % (sum(json.load(open(p))["end"]["sum_received"]["bits_per_second"] for p in sys.argv[1:]) / 1e9))' \
    "${results[@]}"
}

# bench_iperf_has_bidir: whether this iperf3 knows --bidir (3.7+).
bench_iperf_has_bidir() { iperf3 --help 2>&1 | grep -q -- --bidir; }

# ---------------------------------------------------------------- OpenMPI

# bench_mpi_build: compile a C benchmark next to the logs; prints the binary path.
bench_mpi_build() {
  local src=$1 bin
  bin="$BENCH_WORK/$(basename "${src%.c}")"
  mpicc -O2 -Wall -Wextra -Werror "$src" -o "$bin" || bench_die "mpicc $src failed"
  echo "$bin"
}

# bench_mpi_run HOSTS PPN BINARY ARGS...: mpirun from h0 over the namespace
# addresses; orteds reach their namespace through netns-rsh. TCP only on eth0 so
# no traffic leaves the namespaces; vader for ranks sharing a "host". Ranks yield
# when idle because all namespaces share this machine's few cores.
bench_mpi_run() {
  local hosts=$1 ppn=$2; shift 2
  local hostfile="$BENCH_WORK/mpi-hosts" i
  : >"$hostfile"
  for ((i = 0; i < hosts; i++)); do echo "$(bench_ip "$i") slots=$ppn" >>"$hostfile"; done
  # OpenMPI binds nothing itself (--bind-to none), so its ranks run where the scheduler puts
  # them, as ours and Gloo's do. By default it binds each host's ranks to that host's first
  # cores; every emulated host is this one machine, so with one rank per host all ranks sat
  # on CPU 0 (until 2026-12-07; BENCH_MPI_BIND=core brings that back, to compare).
  # Pinned hosts (BENCH_PIN_HOSTS=1): mpirun runs on host 0's CPU, netns-rsh starts each
  # other host's daemon on its own, and the ranks inherit it.
  bench_on 0
  BENCH_PIN_HOSTS=${BENCH_PIN_HOSTS:-0} "${BENCH_ON[@]}" mpirun --allow-run-as-root --oversubscribe \
    -np $((hosts * ppn)) --hostfile "$hostfile" --map-by "ppr:$ppn:node" --bind-to "${BENCH_MPI_BIND:-none}" \
    --mca plm_rsh_agent "$BENCH_DIR/netns-rsh" \
    --mca btl tcp,self,vader --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    --mca mpi_yield_when_idle 1 \
    "$@" 2>>"$BENCH_WORK/mpi.log"
}

# ---------------------------------------------------------------- Gloo

# bench_need_gloo: dies unless $BENCH_PY has torch with Gloo (what bench_gloo_run runs).
bench_need_gloo() {
  "$BENCH_PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
    bench_die "$BENCH_PY has no torch with gloo (apt-get install python3-torch)"
}

# bench_gloo_run HOSTS PPN SCRIPT ARGS...: one python rank per slot, rank r on
# host r / PPN, rendezvous at h0. Only rank 0's stdout is kept.
bench_gloo_run() {
  local hosts=$1 ppn=$2 script=$3; shift 3
  local world=$((hosts * ppn)) port=$((29500 + RANDOM % 1000)) r pids=() rc=0
  local init="tcp://$(bench_ip 0):$port"
  for ((r = world - 1; r >= 0; r--)); do
    local out=/dev/null
    ((r == 0)) && out="$BENCH_WORK/gloo-rank0.out"
    bench_on $((r / ppn))
    GLOO_SOCKET_IFNAME=eth0 "${BENCH_ON[@]}" "$BENCH_PY" "$script" \
      --init "$init" --rank "$r" --world "$world" "$@" >"$out" 2>>"$BENCH_WORK/gloo-rank$r.log" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=$?; done
  cat "$BENCH_WORK/gloo-rank0.out"
  return $rc
}

# ---------------------------------------------------------------- Conduit

bench_conduit_available() { [[ -x $BENCH_BUILD/bin/conduitd && -x $BENCH_BUILD/bin/conduit-perf ]]; }

# BENCH_LISTEN_ANY=1: accept peers on every address (needed when links are bound to
# per-path addresses).
: "${BENCH_LISTEN_ANY:=0}"

# bench_conduit_start HOSTS [CONDUITD ARGS...]: one conduitd per host namespace (extra
# flags passed to each); waits for each socket.
# BENCH_PEER_AUTH: how the daemons authenticate each other: "key" (a cluster key, the
# default, as deployed), "encrypt" (the key plus --encrypt-peers) or "insecure"
# (--insecure-peers: no handshake, the baseline the authentication overhead is measured against).
: "${BENCH_PEER_AUTH:=key}"
BENCH_CONDUITD_PIDS=()
bench_conduit_start() {
  local hosts=$1 i ip sock listen auth=(); shift
  # A daemon from before authentication (issue 12) knows none of these flags.
  local mode=$BENCH_PEER_AUTH help
  help=$("$BENCH_BUILD/bin/conduitd" --help 2>&1 || true)
  [[ $help == *--cluster-key* ]] || mode=none
  case $mode in
    none) ;;
    key | encrypt)
      # 64 hex digits, readable by root only (what `conduitctl keygen` writes).
      [[ -f $BENCH_WORK/cluster.key ]] ||
        (umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$BENCH_WORK/cluster.key")
      auth=(--cluster-key "$BENCH_WORK/cluster.key")
      [[ $mode == encrypt ]] && auth+=(--encrypt-peers) ;;
    insecure) auth=(--insecure-peers) ;;
    *) bench_die "BENCH_PEER_AUTH must be key, encrypt or insecure" ;;
  esac
  for ((i = 0; i < hosts; i++)); do
    ip=$(bench_ip "$i"); sock="$BENCH_WORK/h$i.sock"
    listen=$ip; ((BENCH_LISTEN_ANY)) && listen=0.0.0.0
    rm -f "$sock"
    bench_on "$i"
    "${BENCH_ON[@]}" "$BENCH_BUILD/bin/conduitd" --socket "$sock" \
      --listen "$listen:7650" --advertise "$ip" "${auth[@]}" "$@" ${BENCH_CONDUITD_FLAGS:-} >"$BENCH_WORK/conduitd-h$i.log" 2>&1 &
    BENCH_CONDUITD_PIDS+=($!)
  done
  for ((i = 0; i < hosts; i++)); do
    local waited=0
    until [[ -S $BENCH_WORK/h$i.sock ]]; do
      ((waited++ < 100)) || bench_die "conduitd on h$i did not create its socket in 10 s (see $BENCH_WORK/conduitd-h$i.log)"
      sleep 0.1
    done
  done
}

bench_conduit_stop() {
  local pid
  for pid in "${BENCH_CONDUITD_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${BENCH_CONDUITD_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  BENCH_CONDUITD_PIDS=()
}

# bench_conduit_copies HOSTS PPN PERF_ARGS...: bytes host 0's conduitd wrote to memory per
# payload byte for each size (docs/design.md, "Copies per payload byte"), as lines "size
# ratio". One untimed pass of conduit-perf (one call per size) whose communicator it holds
# open at the end (--hold-ms) while host 0's trace is read: each traced collective carries
# the bytes the daemon counted (memory.per_payload_byte), matched to the size by its count.
bench_conduit_copies() {
  local hosts=$1 ppn=$2; shift 2
  local ctl=("$BENCH_BUILD/bin/conduitctl" --json --socket "$BENCH_WORK/h0-admin.sock") key="" pid waited=0
  case " $* " in *" --coll alltoall "* | *" --coll sendrecv "*) bench_conduit_p2p_copies "$hosts" "$ppn" "$@"; return ;; esac
  rm -f "$BENCH_WORK/copies-trace.json" "$BENCH_WORK/perf-rank0.out"
  bench_conduit_perf "$hosts" "$ppn" "$@" -w 0 -n 1 -c 0 --hold-ms 5000 >"$BENCH_WORK/copies-perf.txt" &
  pid=$!
  # The footer comes once every size has run; the communicator lives 5 s more.
  until grep -q "Avg bus bandwidth" "$BENCH_WORK/perf-rank0.out" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || break
    ((waited++ < 6000)) || break
    sleep 0.05
  done
  key=$("${ctl[@]}" comms 2>/dev/null | grep -o '"key": *"[0-9a-f]*"' | head -1 | cut -d'"' -f4 || true)
  [[ -n $key ]] && "${ctl[@]}" trace "$key" --limit 1024 >"$BENCH_WORK/copies-trace.json" 2>/dev/null || true
  wait "$pid" || true
  [[ -s $BENCH_WORK/copies-trace.json ]] || { bench_log "copies: no trace read from host 0"; return 0; }
  "$BENCH_PY" - "$BENCH_WORK/copies-perf.txt" "$BENCH_WORK/copies-trace.json" <<'PY'
import json, sys
by_count = {}
for e in json.load(open(sys.argv[2]))["trace"]:
    if not e.get("error") and "memory" in e:
        by_count[e["count"]] = e["memory"]["per_payload_byte"]
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 2 and int(f[1]) in by_count:
        print(f[0], by_count[int(f[1])])
PY
}

# bench_conduit_p2p_copies HOSTS PPN PERF_ARGS...: bench_conduit_copies for point-to-point
# (--coll alltoall or sendrecv), which the trace does not hold: one conduit-perf run per
# size (untimed), and host 0's communicator's `p2p_memory` read while it is held open,
# divided by the bytes of host 0's ranks' buffers in all its calls (`p2p_groups`: one per
# rank and call; conduit-perf makes a few calls even with -n 1). The shims' copies of a rank's
# sends to itself (an all-to-all's own block) are not in it (docs/design.md).
bench_conduit_p2p_copies() {
  local hosts=$1 ppn=$2; shift 2
  local ctl=("$BENCH_BUILD/bin/conduitctl" --json --socket "$BENCH_WORK/h0-admin.sock") sizes size pid waited
  sizes=$("$BENCH_PY" - "$@" <<'PY'
import sys
args = sys.argv[1:]
def arg(flag, default):
    return args[args.index(flag) + 1] if flag in args else default
def parse(v):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(v[-1:].upper(), 1)
    return int(float(v[:-1] if scale > 1 else v) * scale)
lo, hi, f = parse(arg("-b", "32M")), parse(arg("-e", "32M")), int(arg("-f", "2"))
while lo <= hi:
    print(lo)
    lo = lo * f if f > 1 else hi + 1
PY
)
  for size in $sizes; do
    rm -f "$BENCH_WORK/perf-rank0.out" "$BENCH_WORK/copies-comms.json"
    bench_conduit_perf "$hosts" "$ppn" "$@" -b "$size" -e "$size" -w 0 -n 1 -c 0 --hold-ms 1500 >/dev/null &
    pid=$!
    waited=0
    until grep -q "Avg bus bandwidth" "$BENCH_WORK/perf-rank0.out" 2>/dev/null; do
      kill -0 "$pid" 2>/dev/null || break
      ((waited++ < 2000)) || break
      sleep 0.05
    done
    "${ctl[@]}" comms >"$BENCH_WORK/copies-comms.json" 2>/dev/null || true
    wait "$pid" || true
    "$BENCH_PY" - "$BENCH_WORK/copies-comms.json" "$size" "$ppn" <<'PY' || true
import json, sys
comms = json.load(open(sys.argv[1]))["communicators"]
size = int(sys.argv[2])
if comms and comms[0].get("p2p_groups"):
    m = comms[0]["p2p_memory"]
    total = sum(m[k] for k in ("program_copies", "local_copies", "socket_sends", "socket_receives"))
    print(size, total / (size * comms[0]["p2p_groups"]))
PY
  done
}

# bench_conduit_perf HOSTS PPN PERF_ARGS...: conduit-perf, one process per rank,
# each talking to its own host's daemon. Prints rank 0's rows converted to the
# common "size count time_us algbw busbw wrong" format: the out-of-place columns, or the
# in-place ones with BENCH_PERF_IN_PLACE=1 (to compare with a peer whose operation is in
# place, as MPI_Bcast and torch's broadcast are).
bench_conduit_perf() {
  local hosts=$1 ppn=$2; shift 2
  local world=$((hosts * ppn)) idf="$BENCH_WORK/perf.id" r pids=() rc=0
  rm -f "$idf"
  for ((r = world - 1; r >= 0; r--)); do
    local h=$((r / ppn)) out=/dev/null
    ((r == 0)) && out="$BENCH_WORK/perf-rank0.out"
    bench_on "$h"
    CONDUIT_SOCKET="$BENCH_WORK/h$h.sock" LD_LIBRARY_PATH="$BENCH_BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "${BENCH_ON[@]}" "$BENCH_BUILD/bin/conduit-perf" \
      --rank "$r" --nranks "$world" --id-file "$idf" "$@" >"$out" 2>>"$BENCH_WORK/perf-rank$r.log" &
    pids+=($!)
  done
  for r in "${pids[@]}"; do wait "$r" || rc=$?; done
  bench_perf_rows "$BENCH_WORK/perf-rank0.out" "$( ((${BENCH_PERF_IN_PLACE:-0} == 1)) && echo in || echo out)"
  return $rc
}

# bench_perf_rows FILE out|in: a conduit-perf output's rows in the common "size count
# time_us algbw busbw wrong" format, from its out-of-place or its in-place columns.
bench_perf_rows() {
  if [[ $2 == in ]]; then
    awk '!/^#/ && NF >= 13 { print $1, $2, $10, $11, $12, $13 }' "$1"
  else
    awk '!/^#/ && NF >= 9 { print $1, $2, $6, $7, $8, $9 }' "$1"
  fi
}
