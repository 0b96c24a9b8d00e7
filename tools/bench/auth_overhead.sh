#!/usr/bin/env bash
# What authenticating (and sealing) daemon connections costs on the data path: the same
# all-reduces and the same gRPC calls with the daemons started --insecure-peers (no
# handshake: the baseline), with a cluster key (the default), and, for RPC, with
# --encrypt-peers; modes interleaved round by round in one run, on the same namespaces.
#
# usage: auth_overhead.sh [--hosts "2 4"] [--rate RATE] [-b 1K] [-e 64M] [-f 8] [-n 50] [-w 5]
#                         [--rounds 3] [--rpc-seconds 3] [--no-rpc] [--out FILE]
#
# --rate shapes every host link (e.g. 1gbit); without it the links run as fast as the veths
# go. All-reduce: conduit-perf, one rank per host, median over rounds of each mode's time per
# size. RPC (2 hosts, tools/bench/rpc/rpc_bench under LD_PRELOAD=libmrpc-grpc.so, no policy):
# 64 B latency (1 in flight), RPC/s (128 in flight), 8 KiB and 1 MiB goodput.
# Prints markdown tables (also --out).
set -euo pipefail

HOSTS_LIST="2 4" RATE= MIN=1K MAX=64M FACTOR=8 ITERS=50 WARMUP=5 ROUNDS=3 RPC_SECONDS=3 RPC=1 OUT=
export BENCH_PREFIX=${BENCH_PREFIX:-cau} BENCH_SUBNET=${BENCH_SUBNET:-10.79.12}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) HOSTS_LIST=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    -b) MIN=$2; shift 2 ;;
    -e) MAX=$2; shift 2 ;;
    -f) FACTOR=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    -w) WARMUP=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --rpc-seconds) RPC_SECONDS=$2; shift 2 ;;
    --no-rpc) RPC=0; shift ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "auth_overhead.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

BENCH_WORK=$(mktemp -d /tmp/conduit-authbench.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
bench_conduit_available || bench_die "$BENCH_BUILD/bin/conduitd or conduit-perf is missing (cmake --build build)"
BIN=$BENCH_BUILD/bin
SHIM=$BENCH_BUILD/lib/libmrpc-grpc.so
SERVER_PID=

cleanup() {
  [[ -n $SERVER_PID ]] && { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
  bench_conduit_stop
  "$BENCH_NETNS" down --prefix "$BENCH_PREFIX" >/dev/null 2>&1 || true
  rm -rf "$BENCH_WORK"
}
trap cleanup EXIT

RESULTS=$BENCH_WORK/results
: >"$RESULTS"
up() {  # up HOSTS: namespaces with the requested link rate
  local args=(up --hosts "$1" --prefix "$BENCH_PREFIX" --subnet "$BENCH_SUBNET")
  [[ -n $RATE ]] && args+=(--rate "$RATE")
  "$BENCH_NETNS" down --prefix "$BENCH_PREFIX" >/dev/null 2>&1 || true
  "$BENCH_NETNS" "${args[@]}" >/dev/null
}

# Modes alternate their order from round to round (the VM's speed drifts over minutes);
# the tables compare modes within each round, then take the median over rounds.
order() {  # order ROUND MODES...
  local round=$1
  shift
  if ((round % 2)); then echo "$@"; else echo "$@" | tr ' ' '\n' | tac | tr '\n' ' '; fi
}

for H in $HOSTS_LIST; do
  up "$H"
  for ((round = 1; round <= ROUNDS; round++)); do
    for mode in $(order "$round" insecure key); do
      BENCH_PEER_AUTH=$mode bench_conduit_start "$H" --log-level warn
      bench_log "allreduce: $H hosts, round $round, $mode"
      bench_conduit_perf "$H" 1 -b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -c 1 \
        --time-budget 2 -a 3 |
        while read -r size count time_us algbw busbw wrong; do
          echo "allreduce $H $mode $size $time_us $wrong $round" >>"$RESULTS"
        done
      bench_conduit_stop
    done
  done
done

if ((RPC)); then
  up 2
  H0=$(bench_ns 0) H1=$(bench_ns 1) IP1=$(bench_ip 1) PORT=50102
  rpc() {  # rpc MODE WORKLOAD ARGS...: one measurement under the preload (in round $round)
    local mode=$1 workload=$2 line
    shift 2
    line=$(ip netns exec "$H0" env CONDUIT_SOCKET="$BENCH_WORK/h0.sock" LD_PRELOAD="$SHIM" "$BIN/conduit-rpc-bench" \
      --target "$IP1:$PORT" --seconds "$RPC_SECONDS" --warmup 1 "$@" 2>>"$BENCH_WORK/client.log" | grep '^calls') ||
      line="calls 0 failed"
    echo "rpc $round $mode $workload $line" >>"$RESULTS"
    bench_log "rpc $mode $workload: $line"
  }
  for ((round = 1; round <= ROUNDS; round++)); do
    for mode in $(order "$round" insecure key encrypt); do
      BENCH_PEER_AUTH=$mode bench_conduit_start 2 --log-level warn
      ip netns exec "$H1" env CONDUIT_SOCKET="$BENCH_WORK/h1.sock" LD_PRELOAD="$SHIM" \
        "$BIN/conduit-rpc-bench-server" --listen "0.0.0.0:$PORT" >"$BENCH_WORK/server.log" 2>&1 &
      SERVER_PID=$!
      for ((i = 0; i < 100; i++)); do grep -q listening "$BENCH_WORK/server.log" && break; sleep 0.1; done
      rpc "$mode" lat --request-bytes 64 --reply-bytes 8 --inflight 1
      rpc "$mode" rate --request-bytes 64 --reply-bytes 8 --inflight 128
      rpc "$mode" 8k --request-bytes 8192 --reply-bytes 8 --inflight 64
      rpc "$mode" 1m --request-bytes 1048576 --reply-bytes 8 --inflight 8
      kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=
      bench_conduit_stop
    done
  done
fi

"$BENCH_PY" "$BENCH_DIR/auth_overhead_table.py" "$RESULTS" "${RATE:-unshaped}" | tee ${OUT:+"$OUT"}
