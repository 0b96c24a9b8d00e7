#!/usr/bin/env bash
# Does the reconfiguration machinery cost anything when nothing changes? conduit-perf
# all-reduce latency/bandwidth with a baseline build (e.g. main, before the operator plane)
# and this build, on the same namespaces, alternating runs; then this build again while an
# operator reconfigures the communicator every --every-ms (the cost when things do change).
#
# usage: reconfig_overhead.sh --baseline BUILD_DIR [--hosts 2] [-b 8] [-e 16M] [-f 8]
#                             [-n 50] [-w 10] [--rounds 2] [--every-ms 100] [--rate R]
#                             [--prefix pro] [--subnet 10.79.30] [--out FILE]
set -euo pipefail

BASELINE= HOSTS=2 MIN=8 MAX=16M FACTOR=8 ITERS=50 WARMUP=10 ROUNDS=2 EVERY_MS=100 RATE= OUT=
export BENCH_PREFIX=${BENCH_PREFIX:-pro} BENCH_SUBNET=${BENCH_SUBNET:-10.79.30}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --baseline) BASELINE=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    -b) MIN=$2; shift 2 ;;
    -e) MAX=$2; shift 2 ;;
    -f) FACTOR=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    -w) WARMUP=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --every-ms) EVERY_MS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --prefix) BENCH_PREFIX=$2; shift 2 ;;
    --subnet) BENCH_SUBNET=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reconfig_overhead.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ -n $BASELINE ]] || { echo "reconfig_overhead.sh: --baseline BUILD_DIR is required" >&2; exit 2; }

BENCH_WORK=$(mktemp -d /tmp/conduit-reconfig-overhead.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OURS=$BENCH_BUILD
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
for b in "$BASELINE" "$OURS"; do
  [[ -x $b/bin/conduitd && -x $b/bin/conduit-perf ]] || bench_die "$b has no conduitd/conduit-perf"
done

CHURN_PID=
cleanup() {
  [[ -z $CHURN_PID ]] || kill "$CHURN_PID" 2>/dev/null || true
  bench_conduit_stop
  bench_cluster_down
  rm -rf "$BENCH_WORK"
}
trap cleanup EXIT

if [[ -n $RATE ]]; then
  "$BENCH_NETNS" up --hosts "$HOSTS" --prefix "$BENCH_PREFIX" --subnet "$BENCH_SUBNET" --rate "$RATE"
else
  "$BENCH_NETNS" up --hosts "$HOSTS" --prefix "$BENCH_PREFIX" --subnet "$BENCH_SUBNET"
fi

# churn: reconfigure the only communicator on h0 every EVERY_MS until killed.
churn() {
  local ctl="$OURS/bin/conduitctl --socket $BENCH_WORK/h0-admin.sock" key="" n=0
  while [[ -z $key ]]; do
    key=$($ctl --json comms 2>/dev/null | "$BENCH_PY" -c '
import json, sys
c = [x["key"] for x in json.load(sys.stdin)["communicators"] if x.get("ready")]
print(c[0] if c else "")' || true)
    sleep 0.05
  done
  while true; do
    $ctl reconfigure "$key" --ring reverse --wait-ms 5000 >/dev/null 2>&1 && n=$((n + 1))
    echo "$n" >"$BENCH_WORK/churn.count"
    sleep "$("$BENCH_PY" -c "print($EVERY_MS / 1000)")"
  done
}

# perf_args BUILD: conduit-perf's all-reduce flags for that build. Since issue 14 it takes
# nccl-tests' flags (-o is the reduction, -a 3 the slowest rank's time, no time budget by
# default); a baseline built before takes the old ones (-o the collective, -r the reduction).
perf_args() {
  if "$1/bin/conduit-perf" --help 2>/dev/null | grep -q -- --coll; then
    echo -d float -o sum -a 3
  else
    echo -o allreduce -d float -r sum -T 0
  fi
}

# run NAME BUILD [churn]: one conduit-perf sweep; rows "size time_us algbw" in $BENCH_WORK/NAME.
run() {
  local name=$1 build=$2
  BENCH_BUILD=$build bench_conduit_start "$HOSTS"
  if [[ ${3:-} == churn ]]; then
    churn &
    CHURN_PID=$!
  fi
  # shellcheck disable=SC2046 # perf_args prints separate flags
  BENCH_BUILD=$build bench_conduit_perf "$HOSTS" 1 $(perf_args "$build") -b "$MIN" -e "$MAX" -f "$FACTOR" \
    -n "$ITERS" -w "$WARMUP" >"$BENCH_WORK/$name" || bench_log "$name: conduit-perf failed"
  if [[ -n $CHURN_PID ]]; then
    kill "$CHURN_PID" 2>/dev/null || true
    wait "$CHURN_PID" 2>/dev/null || true
    CHURN_PID=
    bench_log "$name: $(cat "$BENCH_WORK/churn.count" 2>/dev/null || echo 0) reconfigurations applied during the sweep"
    cp "$BENCH_WORK/churn.count" "$BENCH_WORK/$name.count" 2>/dev/null || echo 0 >"$BENCH_WORK/$name.count"
  fi
  bench_conduit_stop
}

for ((r = 0; r < ROUNDS; r++)); do
  bench_log "round $r: baseline ($BASELINE)"
  run "base.$r" "$BASELINE"
  bench_log "round $r: this build ($OURS)"
  run "ours.$r" "$OURS"
done
bench_log "this build with a reconfiguration every ${EVERY_MS} ms"
run churn "$OURS" churn

"$BENCH_PY" - "$BENCH_WORK" "$ROUNDS" "$HOSTS" "${RATE:-unshaped}" "$EVERY_MS" <<'PY' | tee "${OUT:-/dev/null}"
import sys, statistics
work, rounds, hosts, rate, every = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def load(name):
    rows = {}
    for line in open(f"{work}/{name}"):
        f = line.split()
        if len(f) >= 6 and f[0].isdigit():
            rows[int(f[0])] = (float(f[2]), float(f[3]))  # time_us, algbw GB/s
    return rows
base = [load(f"base.{r}") for r in range(rounds)]
ours = [load(f"ours.{r}") for r in range(rounds)]
churn = load("churn")
count = open(f"{work}/churn.count").read().strip() if True else "0"
print(f"all-reduce float sum, {hosts} hosts x 1 rank, links {rate}; median of {rounds} alternating runs per build\n")
print(f"| bytes | baseline us | this build us | change | this build, reconfigured every {every} ms: us |")
print("| --- | --- | --- | --- | --- |")
for size in sorted(base[0]):
    b = statistics.median(x[size][0] for x in base if size in x)
    o = statistics.median(x[size][0] for x in ours if size in x)
    c = churn.get(size, (float("nan"),))[0]
    print(f"| {size} | {b:.1f} | {o:.1f} | {100 * (o - b) / b:+.1f}% | {c:.1f} |")
PY
