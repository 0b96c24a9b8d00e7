#!/usr/bin/env bash
# Where a collective's time goes: conduit-perf's time per call (what the program sees) next
# to the daemons' own time for each collective (host 0's trace, GET
# /v1/communicators/{key}/trace), as median, 90th percentile and the slowest five. A
# program time far above the daemon's median is spent outside the daemon's collective (the
# program's copies, its request and reply); a daemon median near its program time with a
# long tail is a few slow collectives, not a slow path.
#
# usage: coll_trace.sh [--hosts 2] [--ppn 1] [-b 64K] [-e 64K] [-f 2] [-n 100] [--rate 40gbit]
#                      [-- CONDUITD FLAGS...]
# The trace keeps the newest 1024 collectives: keep the sweep short (the daemon's figures are
# per size, of those still in the trace when the program ended). Needs root.
set -euo pipefail
HOSTS=2 PPN=1 MIN=64K MAX=64K FACTOR=2 ITERS=100 RATE=40gbit
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) HOSTS=$2; shift 2 ;;
    --ppn) PPN=$2; shift 2 ;;
    -b) MIN=$2; shift 2 ;;
    -e) MAX=$2; shift 2 ;;
    -f) FACTOR=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "coll_trace.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
export BENCH_PREFIX=${BENCH_PREFIX:-ctr} BENCH_SUBNET=${BENCH_SUBNET:-10.76.0}
BENCH_WORK=$(mktemp -d /tmp/conduit-trace.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
bench_conduit_available || bench_die "build/bin/conduitd or conduit-perf missing (cmake --build build)"
trap 'bench_conduit_stop; bench_cluster_down >/dev/null 2>&1; rm -rf "$BENCH_WORK"' EXIT
bench_cluster_up "$HOSTS" "$RATE" >/dev/null
bench_conduit_start "$HOSTS" "$@"
bench_conduit_perf "$HOSTS" "$PPN" --coll all_reduce -d float -o sum -b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" \
  -w 5 >"$BENCH_WORK/perf.txt" &
perf_pid=$!
# The communicator ends with the program: read its trace until then, keeping the last answer
# (the run must last a few reads: -n).
ctl=("$BENCH_BUILD/bin/conduitctl" --json --socket "$BENCH_WORK/h0-admin.sock")
while kill -0 "$perf_pid" 2>/dev/null; do
  "${ctl[@]}" comms >"$BENCH_WORK/comms.json" 2>/dev/null || true
  key=$(grep -o '"key": *"[0-9a-f]*"' "$BENCH_WORK/comms.json" | head -1 | cut -d'"' -f4 || true)
  if [[ -z $key ]]; then sleep 0.005; continue; fi
  "${ctl[@]}" trace "$key" --limit 1024 >"$BENCH_WORK/trace.tmp" 2>/dev/null &&
    mv "$BENCH_WORK/trace.tmp" "$BENCH_WORK/trace.json"
  sleep 0.05  # each read costs the daemon a request: read rarely, not to slow what it measures
done
wait "$perf_pid"
[[ -s $BENCH_WORK/trace.json ]] || bench_die "no trace was read before the program ended (a longer run: -n)"
"$BENCH_PY" - "$BENCH_WORK/perf.txt" "$BENCH_WORK/trace.json" <<'PY'
import json, statistics, sys
program = {int(f[0]): float(f[2]) for f in (l.split() for l in open(sys.argv[1])) if len(f) >= 3}
trace = json.load(open(sys.argv[2]))["trace"]
print("| bytes | program us/call | daemon h0 median us | p90 | slowest five | collectives in trace |")
print("|---:|---:|---:|---:|---|---:|")
for size, t in sorted(program.items()):
    d = sorted(e["duration_us"] for e in trace if e["bytes"] == size)
    if not d:
        print(f"| {size} | {t:.1f} | | | (none left in the trace) | 0 |")
        continue
    tail = " / ".join(f"{x:.0f}" for x in d[-5:])
    print(f"| {size} | {t:.1f} | {statistics.median(d):.1f} | {d[9 * len(d) // 10]:.1f} | {tail} | {len(d)} |")
PY
