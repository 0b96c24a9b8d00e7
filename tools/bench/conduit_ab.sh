#!/usr/bin/env bash
# A/B of two Conduit configurations on one cluster, in one run: the way a data-path change
# is kept or dropped (docs/benchmarks.md). Rounds alternate A and B (A B A B ...) so drift
# in the machine's load hits both; the table shows each round and the ratio of medians.
#
# usage: conduit_ab.sh --a "SPEC" --b "SPEC" [--hosts 2] [--ppn 1] [--rounds 3]
#                      [--rate 40gbit] [--coll all_reduce] [-b 1K] [-e 32M] [-f 8] [-n 200]
#                      [-w 5] [-T 1] [--dtype float] [--perf "ARGS"] [--out FILE]
# SPEC: conduitd flags, and environment for that variant's daemons and programs as
# NAME=VALUE words, e.g.
#   --a "--busy-poll-us 0 CONDUIT_BUSY_POLL_US=0" --b ""
#   --a "CONDUIT_REDUCE_ISA=baseline" --b "" --dtype half
# The word BENCH_BUILD=DIR runs that variant's daemons and programs from another build
# (a before/after of two commits): --a "BENCH_BUILD=/tmp/base/build" --b "".
# --rate: links shaped to it (40gbit: left fast, as allreduce_bench.sh's "fast" mode).
# --perf: more conduit-perf arguments for both variants (e.g. "-R 1": ncclMemAlloc buffers).
set -euo pipefail

A= B= HOSTS=2 PPN=1 ROUNDS=3 RATE=40gbit COLL=all_reduce MIN=1K MAX=32M FACTOR=8 ITERS=200 WARMUP=5 BUDGET=1 OUT= PERF_ARGS=
DTYPE=float
export BENCH_PREFIX=${BENCH_PREFIX:-cab} BENCH_SUBNET=${BENCH_SUBNET:-10.77.0}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --a) A=$2; shift 2 ;;
    --b) B=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --ppn) PPN=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --coll) COLL=$2; shift 2 ;;
    -b) MIN=$2; shift 2 ;;
    -e) MAX=$2; shift 2 ;;
    -f) FACTOR=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    -w) WARMUP=$2; shift 2 ;;
    -T) BUDGET=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --perf) PERF_ARGS=$2; shift 2 ;;
    --dtype) DTYPE=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "conduit_ab.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

BENCH_WORK=$(mktemp -d /tmp/conduit-ab.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
bench_conduit_available || bench_die "build/bin/conduitd or conduit-perf missing (cmake --build build)"
trap 'bench_conduit_stop; bench_cluster_down; rm -rf "$BENCH_WORK"' EXIT

# run_variant SPEC RESULT_FILE: daemons with SPEC's flags, daemons and conduit-perf with
# its environment.
run_variant() {
  local flags=() word
  local BENCH_BUILD=$BENCH_BUILD  # lib.sh reads it at each start: a variant's own build
  for word in $1; do
    if [[ $word == BENCH_BUILD=* ]]; then BENCH_BUILD=${word#BENCH_BUILD=}
    # Exported while this function runs: this variant's daemons and programs see it.
    elif [[ $word =~ ^[A-Z_][A-Z0-9_]*= ]]; then local -x "$word"; else flags+=("$word"); fi
  done
  bench_conduit_start "$HOSTS" "${flags[@]}"
  bench_conduit_perf "$HOSTS" "$PPN" --coll "$COLL" -d "$DTYPE" -o sum -a 3 -b "$MIN" -e "$MAX" -f "$FACTOR" \
    -n "$ITERS" -w "$WARMUP" --time-budget "$BUDGET" $PERF_ARGS >"$2" ||
    bench_log "conduit-perf failed with '$1' (logs in $BENCH_WORK)"
  bench_conduit_stop
}

bench_cluster_up "$HOSTS" "$RATE"
bench_log "machine: $(bench_machine)"
bench_log "iperf3 h0->h1: $(bench_iperf) Gbit/s"
for ((r = 1; r <= ROUNDS; r++)); do
  bench_log "round $r: A"; run_variant "$A" "$BENCH_WORK/a.$r"
  bench_log "round $r: B"; run_variant "$B" "$BENCH_WORK/b.$r"
done

"$BENCH_PY" - "$BENCH_WORK" "$ROUNDS" "$A" "$B" "$HOSTS" "$PPN" "$RATE" "$COLL" <<'PY' | tee ${OUT:+"$OUT"}
import statistics, sys
work, rounds, a, b, hosts, ppn, rate, coll = sys.argv[1:]
rounds = int(rounds)
def load(name):
    out = {}
    for r in range(1, rounds + 1):
        try:
            for line in open(f"{work}/{name}.{r}"):
                p = line.split()
                if len(p) >= 6: out.setdefault(int(p[0]), []).append(float(p[2]))
        except FileNotFoundError:
            pass
    return out
ta, tb = load("a"), load("b")
print(f"### {coll}, {hosts} hosts x {ppn} ranks, links {rate}: A = `{a or '(defaults)'}`, B = `{b or '(defaults)'}`\n")
print("| size | A us (rounds) | B us (rounds) | A/B (medians; > 1: B faster) |")
print("|---:|---|---|---:|")
for size in sorted(set(ta) | set(tb)):
    ra, rb = ta.get(size, []), tb.get(size, [])
    ratio = f"{statistics.median(ra) / statistics.median(rb):.2f}" if ra and rb else "-"
    fmt = lambda v: " / ".join(f"{x:.0f}" for x in v) or "-"
    print(f"| {size} | {fmt(ra)} | {fmt(rb)} | {ratio} |")
PY
