#!/usr/bin/env bash
# gRPC three ways on the same two network namespaces: direct, through an nginx sidecar on
# each side (grpc_pass), and under LD_PRELOAD=libmrpc-grpc.so with conduitd on each host;
# the last with no policy, a rate limit set to infinity, and an ACL on a request field.
#
# usage: rpc_bench.sh [--seconds 5] [--warmup 1] [--repeat 1] [--qos] [--tls] [--rate RATE]
#                     [--prefix rbn] [--subnet 10.79.9] [--out FILE] [--keep-work]
# --rate shapes the link between the two hosts (conduit-netns up --rate, e.g. 1gbit);
# without it the veth is left fast.
#
# Workloads (tools/bench/rpc/rpc_bench, one client thread, async API):
#   lat    64 B requests, 8 B replies, 1 call in flight: median and P99 latency
#   rate   64 B requests, 8 B replies, 128 calls in flight: calls per second
#   8k     8 KiB requests, 8 B replies, 64 in flight: request goodput
#   1m     1 MiB requests, 8 B replies, 8 in flight: request goodput
# Each round ends with an A/B of the managed server with and without gRPC's own listener
# beside conduitd (lat workload, back to back; CONDUIT_RPC_NATIVE_LISTENER=0).
# Configurations run one after the other, never concurrently (they share the CPU);
# --repeat N interleaves N rounds and reports each figure's median over the rounds.
# --qos adds the small-RPC-first experiment: the lat workload next to a 1 MiB bulk client,
# under the preload, with the QoS policy off and on. --tls adds the three configurations
# over TLS (a CA and a server certificate made here with openssl): gRPC direct with SSL
# credentials; sidecars that speak TLS between them (plaintext to their programs on
# loopback, as a mesh does); and the preloaded programs with SSL credentials, the daemons
# running the programs' TLS handshake and sealing the link with its keys.
# Prints markdown tables (also --out).
set -euo pipefail

SECONDS_PER_RUN=5 WARMUP=1 REPEAT=1 QOS=0 TLS=0 OUT= KEEP=0 RATE=
export BENCH_PREFIX=${BENCH_PREFIX:-rbn} BENCH_SUBNET=${BENCH_SUBNET:-10.79.9}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --qos) QOS=1; shift ;;
    --tls) TLS=1; shift ;;
    --rate) RATE=$2; shift 2 ;;
    --prefix) BENCH_PREFIX=$2; shift 2 ;;
    --subnet) BENCH_SUBNET=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --keep-work) KEEP=1; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rpc_bench.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

BENCH_WORK=$(mktemp -d /tmp/conduit-rpcbench.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
BIN=$BENCH_BUILD/bin
SHIM=$BENCH_BUILD/lib/libmrpc-grpc.so
for f in "$BIN/conduitd" "$BIN/conduitctl" "$BIN/conduit-rpc-bench" "$BIN/conduit-rpc-bench-server" "$BIN/bench.desc" "$SHIM"; do
  [[ -e $f ]] || bench_die "$f is missing (cmake --build build)"
done
if ! command -v nginx >/dev/null; then
  bench_log "installing nginx (the sidecar)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null || bench_die "cannot install nginx"
fi

H0=$(bench_ns 0) H1=$(bench_ns 1) IP0=$(bench_ip 0) IP1=$(bench_ip 1)
DIRECT_PORT=50100 SIDECAR_SERVER_PORT=50101 CONDUIT_PORT=50102 CONDUIT_ONLY_PORT=50103 SIDECAR_SERVER_SIDE=50111 SIDECAR_CLIENT_SIDE=50121
TLS_DIRECT_PORT=50104 TLS_CONDUIT_PORT=50105
PIDS=()

cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  bench_conduit_stop
  "$BENCH_NETNS" down --prefix "$BENCH_PREFIX"
  if ((KEEP)); then echo "# work dir kept: $BENCH_WORK" >&2; else rm -rf "$BENCH_WORK"; fi
}
trap cleanup EXIT

# nginx_conf FILE LISTEN UPSTREAM [LIMIT]: a sidecar passing h2c gRPC from LISTEN to
# UPSTREAM over kept-alive connections; LIMIT adds a limit_req of (practically) infinite rate.
nginx_conf() {
  local file=$1 listen=$2 upstream=$3 limit=${4:-} dir
  dir=$(dirname "$file")
  mkdir -p "$dir/tmp"
  cat >"$file" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  client_max_body_size 0;
  http2_max_concurrent_streams 1024;
  ${limit:+limit_req_zone \$server_name zone=all:1m rate=100000000r/s;}
  upstream app { server $upstream; keepalive 256; }
  server {
    listen $listen http2;
    location / {
      ${limit:+limit_req zone=all burst=100000000 nodelay;}
      grpc_pass grpc://app;
      grpc_read_timeout 60s;
      grpc_send_timeout 60s;
    }
  }
}
EOF
}

# nginx_tls_conf FILE LISTEN UPSTREAM server|client: the server-side sidecar terminates TLS
# (the server's certificate) and passes h2c to its program; the client-side one takes h2c
# from its program and speaks TLS to the other sidecar, checking its certificate.
nginx_tls_conf() {
  local file=$1 listen=$2 upstream=$3 side=$4 dir listen_opts pass tls_lines
  dir=$(dirname "$file")
  if [[ $side == server ]]; then
    listen_opts="ssl http2"
    pass="grpc://app"
    tls_lines="ssl_certificate $BENCH_WORK/tls/server.pem; ssl_certificate_key $BENCH_WORK/tls/server.key; ssl_protocols TLSv1.3;"
  else
    listen_opts="http2"
    pass="grpcs://app"
    tls_lines="grpc_ssl_trusted_certificate $BENCH_WORK/tls/ca.pem; grpc_ssl_verify on; grpc_ssl_name bench.server; grpc_ssl_session_reuse on; grpc_ssl_protocols TLSv1.3;"
  fi
  nginx_conf "$file" "$listen" "$upstream"
  sed -i "s|listen $listen http2;|listen $listen $listen_opts; $tls_lines|; s|grpc_pass grpc://app;|grpc_pass $pass;|" "$file"
}

# make_tls_files: a CA and a server certificate for $IP1 (EC P-256), in $BENCH_WORK/tls.
make_tls_files() {
  local d=$BENCH_WORK/tls
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench CA" \
    -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=bench server" \
    -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:%s,DNS:bench.server\n' "$IP1" >"$d/san.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
    -extfile "$d/san.ext" -out "$d/server.pem" 2>/dev/null
}

start_bg() {  # start_bg NS LOG CMD...: runs CMD in NS in the background
  local ns=$1 log=$2
  shift 2
  ip netns exec "$ns" "$@" >"$log" 2>&1 &
  PIDS+=($!)
}

wait_for() {  # wait_for LOG TEXT
  local i
  for ((i = 0; i < 100; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  bench_die "'$2' never appeared in $1: $(tail -5 "$1")"
}

start_sidecars() {  # start_sidecars NAME [limit]
  local name=$1 limit=${2:-}
  nginx_conf "$BENCH_WORK/$name-h1/nginx.conf" "$IP1:$SIDECAR_SERVER_SIDE" "127.0.0.1:$SIDECAR_SERVER_PORT"
  nginx_conf "$BENCH_WORK/$name-h0/nginx.conf" "127.0.0.1:$SIDECAR_CLIENT_SIDE" "$IP1:$SIDECAR_SERVER_SIDE" "$limit"
  start_bg "$H1" "$BENCH_WORK/$name-h1.log" nginx -p "$BENCH_WORK/$name-h1" -c "$BENCH_WORK/$name-h1/nginx.conf"
  SIDECAR_PIDS=("${PIDS[-1]}")
  start_bg "$H0" "$BENCH_WORK/$name-h0.log" nginx -p "$BENCH_WORK/$name-h0" -c "$BENCH_WORK/$name-h0/nginx.conf"
  SIDECAR_PIDS+=("${PIDS[-1]}")
  sleep 0.5
}

stop_sidecars() {
  local pid
  for pid in "${SIDECAR_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
}

admin() { "$BIN/conduitctl" --socket "$BENCH_WORK/h0-admin.sock" "$@" >>"$BENCH_WORK/admin.log" 2>&1; }

set_policy() {  # set_policy none|inf|acl: policies of the client's daemon
  admin raw DELETE /v1/policies/rpc-ratelimit/bench || true
  admin raw DELETE /v1/policies/rpc-acl/bench || true
  case "$1" in
    inf) admin policy set rpc-ratelimit bench '{"service":"conduit.bench.Bench","rate":"inf"}' ;;
    acl) admin policy set rpc-acl bench "{\"service\":\"conduit.bench.Bench\",\"field\":\"user\",\"deny\":[\"mallory\"],\"descriptor_set_file\":\"$BIN/bench.desc\"}" ;;
  esac
}

# run_client CONFIG POLICY WORKLOAD TARGET [preload] [tls]: one measurement, appended to results.
RESULTS=$BENCH_WORK/results
run_client() {
  local config=$1 policy=$2 workload=$3 target=$4 preload=${5:-} tls=${6:-} args line
  case "$workload" in
    lat) args=(--request-bytes 64 --reply-bytes 8 --inflight 1) ;;
    rate) args=(--request-bytes 64 --reply-bytes 8 --inflight 128) ;;
    8k) args=(--request-bytes 8192 --reply-bytes 8 --inflight 64) ;;
    1m) args=(--request-bytes 1048576 --reply-bytes 8 --inflight 8) ;;
  esac
  [[ -n $tls ]] && args+=(--tls-roots "$BENCH_WORK/tls/ca.pem")
  local env=(env)
  [[ -n $preload ]] && env+=(CONDUIT_SOCKET="$BENCH_WORK/h0.sock" LD_PRELOAD="$SHIM")
  line=$(ip netns exec "$H0" "${env[@]}" "$BIN/conduit-rpc-bench" --target "$target" --seconds "$SECONDS_PER_RUN" \
    --warmup "$WARMUP" "${args[@]}" 2>>"$BENCH_WORK/client.log" | grep '^calls') || line="calls 0 failed"
  echo "$config $policy $workload $line" >>"$RESULTS"
  bench_log "$config/$policy/$workload: $line"
}

"$BENCH_NETNS" up --hosts 2 --prefix "$BENCH_PREFIX" --subnet "$BENCH_SUBNET" ${RATE:+--rate "$RATE"}
bench_conduit_start 2
start_bg "$H1" "$BENCH_WORK/server-direct.log" "$BIN/conduit-rpc-bench-server" --listen "0.0.0.0:$DIRECT_PORT"
start_bg "$H1" "$BENCH_WORK/server-sidecar.log" "$BIN/conduit-rpc-bench-server" --listen "127.0.0.1:$SIDECAR_SERVER_PORT"
start_bg "$H1" "$BENCH_WORK/server-conduit.log" env CONDUIT_SOCKET="$BENCH_WORK/h1.sock" LD_PRELOAD="$SHIM" \
  "$BIN/conduit-rpc-bench-server" --listen "0.0.0.0:$CONDUIT_PORT"
# The same server without gRPC's own listener beside conduitd: what serving native clients
# too costs the managed path (the "lat" workload, next to the default's).
start_bg "$H1" "$BENCH_WORK/server-conduit-only.log" env CONDUIT_SOCKET="$BENCH_WORK/h1.sock" LD_PRELOAD="$SHIM" \
  CONDUIT_RPC_NATIVE_LISTENER=0 "$BIN/conduit-rpc-bench-server" --listen "0.0.0.0:$CONDUIT_ONLY_PORT"
for s in direct sidecar conduit conduit-only; do wait_for "$BENCH_WORK/server-$s.log" "listening"; done
grep -q "served through conduitd" "$BENCH_WORK/server-conduit.log" || bench_die "the preloaded server is not managed"
if ((TLS)); then
  make_tls_files
  tls_server=(--tls-cert "$BENCH_WORK/tls/server.pem" --tls-key "$BENCH_WORK/tls/server.key")
  start_bg "$H1" "$BENCH_WORK/server-tls-direct.log" "$BIN/conduit-rpc-bench-server" \
    --listen "0.0.0.0:$TLS_DIRECT_PORT" "${tls_server[@]}"
  start_bg "$H1" "$BENCH_WORK/server-tls-conduit.log" env CONDUIT_SOCKET="$BENCH_WORK/h1.sock" LD_PRELOAD="$SHIM" \
    "$BIN/conduit-rpc-bench-server" --listen "0.0.0.0:$TLS_CONDUIT_PORT" "${tls_server[@]}"
  for s in tls-direct tls-conduit; do wait_for "$BENCH_WORK/server-$s.log" "listening"; done
  grep -q "served through conduitd with TLS" "$BENCH_WORK/server-tls-conduit.log" ||
    bench_die "the preloaded TLS server is not managed: $(cat "$BENCH_WORK/server-tls-conduit.log")"
fi

WORKLOADS=(lat rate 8k 1m)
for ((round = 1; round <= REPEAT; round++)); do
  bench_log "round $round of $REPEAT"
  for w in "${WORKLOADS[@]}"; do run_client direct - "$w" "$IP1:$DIRECT_PORT"; done
  start_sidecars plain
  for w in "${WORKLOADS[@]}"; do run_client sidecar - "$w" "127.0.0.1:$SIDECAR_CLIENT_SIDE"; done
  stop_sidecars
  start_sidecars limited limit
  for w in "${WORKLOADS[@]}"; do run_client sidecar inf "$w" "127.0.0.1:$SIDECAR_CLIENT_SIDE"; done
  stop_sidecars
  for policy in none inf acl; do
    set_policy "$policy"
    for w in "${WORKLOADS[@]}"; do run_client conduit "$policy" "$w" "$IP1:$CONDUIT_PORT" preload; done
  done
  if ((TLS)); then
    for w in "${WORKLOADS[@]}"; do run_client tls-direct - "$w" "$IP1:$TLS_DIRECT_PORT" "" tls; done
    nginx_tls_conf "$BENCH_WORK/tls-h1/nginx.conf" "$IP1:$SIDECAR_SERVER_SIDE" "127.0.0.1:$SIDECAR_SERVER_PORT" server
    nginx_tls_conf "$BENCH_WORK/tls-h0/nginx.conf" "127.0.0.1:$SIDECAR_CLIENT_SIDE" "$IP1:$SIDECAR_SERVER_SIDE" client
    start_bg "$H1" "$BENCH_WORK/tls-h1.log" nginx -p "$BENCH_WORK/tls-h1" -c "$BENCH_WORK/tls-h1/nginx.conf"
    SIDECAR_PIDS=("${PIDS[-1]}")
    start_bg "$H0" "$BENCH_WORK/tls-h0.log" nginx -p "$BENCH_WORK/tls-h0" -c "$BENCH_WORK/tls-h0/nginx.conf"
    SIDECAR_PIDS+=("${PIDS[-1]}")
    sleep 0.5
    for w in "${WORKLOADS[@]}"; do run_client tls-sidecar - "$w" "127.0.0.1:$SIDECAR_CLIENT_SIDE"; done
    stop_sidecars
    for w in "${WORKLOADS[@]}"; do run_client tls-conduit none "$w" "$IP1:$TLS_CONDUIT_PORT" preload tls; done
    grep -q "carried by conduitd (TLS)" "$BENCH_WORK/client.log" || bench_die "the TLS client was not managed"
  fi
  # A/B, back to back: the managed server with and without its native listener.
  run_client ab-native none lat "$IP1:$CONDUIT_PORT" preload
  run_client ab-only none lat "$IP1:$CONDUIT_ONLY_PORT" preload
  set_policy none
done

if ((QOS)); then
  # A latency-sensitive client next to a bulk one, both under the preload.
  for qos in off on; do
    if [[ $qos == on ]]; then admin policy set rpc-qos '{"small_bytes":4096}'; else admin raw DELETE /v1/policies/rpc-qos || true; fi
    ip netns exec "$H0" env CONDUIT_SOCKET="$BENCH_WORK/h0.sock" LD_PRELOAD="$SHIM" "$BIN/conduit-rpc-bench" \
      --target "$IP1:$CONDUIT_PORT" --seconds "$(awk "BEGIN { print $SECONDS_PER_RUN + $WARMUP + 2 }")" --warmup 0 \
      --request-bytes 1048576 --reply-bytes 8 --inflight 8 >"$BENCH_WORK/bulk-$qos.out" 2>>"$BENCH_WORK/client.log" &
    bulk=$!
    sleep 1
    run_client qos "$qos" lat "$IP1:$CONDUIT_PORT" preload
    wait "$bulk" || true
    echo "bulk $qos $(grep '^calls' "$BENCH_WORK/bulk-$qos.out")" >>"$RESULTS"
  done
  admin raw DELETE /v1/policies/rpc-qos || true
fi

"$BENCH_PY" "$BENCH_DIR/rpc_bench_table.py" "$RESULTS" | tee ${OUT:+"$OUT"}
