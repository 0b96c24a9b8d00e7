#!/usr/bin/env bash
# MCCS's operator-plane cases (seed 000, section 4.6) on tc-shaped namespace networks:
#
#   1. ring order: 4 hosts in 2 racks joined by a slower inter-rack link, ranks placed
#      so rank order alternates racks. Rank-order ring (what a library does: crosses the
#      inter-rack link twice per direction) vs the daemons' locality-aware ring.
#   2. flow assignment: 2 hosts joined by 2 direct links (paths); two tenants all-reduce
#      at once with every connection on path 0 ("single"), hashed ("hash", ECMP-like)
#      and with fair flow assignment ("balance"). Per-tenant and aggregate algbw, Jain
#      fairness.
#   3. background flow: 4 hosts joined by direct links, ring h0>h1>h2>h3; a UDP flow at
#      75% of one link's rate (MCCS: 75 of 100 Gbps) loads the h0->h1 direction while the
#      ring runs that way; then the operator reverses the ring (live reconfiguration).
#      algbw time series before / during / after.
#   4. priority and time-window scheduling (beyond the three above): a prioritized tenant
#      that computes between all-reduces shares one path with a bulk tenant; without
#      policy, and with the bulk tenant yielding (sending only while the prioritized one is
#      idle).
#
# usage: mccs_bench.sh [--cases "1 2 3"] [-b BYTES] [--seconds S] [--host-rate R]
#                      [--trunk-rate R] [--path-rate R] [--queue PKTS] [--prefix pmb]
#                      [--subnet 10.79.10] [--out FILE] [--keep-work]
# Rates are low on purpose (this machine has 2 cores): the shaped links, not the CPU, must
# be the bottleneck. Shaped links queue --queue packets (default 200: a shallow switch
# port; see conduit-netns). Results go to stdout as markdown (and to --out).
set -euo pipefail

CASES="1 2 3 4" BYTES=$((16 << 20)) SECONDS_PER_RUN=15 HOST_RATE=1gbit TRUNK_RATE=200mbit PATH_RATE=200mbit QUEUE=200
OUT= KEEP=0
export BENCH_PREFIX=${BENCH_PREFIX:-pmb} BENCH_SUBNET=${BENCH_SUBNET:-10.79.10}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cases) CASES=$2; shift 2 ;;
    -b) BYTES=$2; shift 2 ;;
    --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
    --host-rate) HOST_RATE=$2; shift 2 ;;
    --trunk-rate) TRUNK_RATE=$2; shift 2 ;;
    --path-rate) PATH_RATE=$2; shift 2 ;;
    --queue) QUEUE=$2; shift 2 ;;
    --prefix) BENCH_PREFIX=$2; shift 2 ;;
    --subnet) BENCH_SUBNET=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --keep-work) KEEP=1; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "mccs_bench.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

BENCH_WORK=$(mktemp -d /tmp/conduit-mccs-bench.XXXXXX)
export BENCH_WORK
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $EUID -eq 0 ]] || bench_die "needs root (network namespaces)"
for tool in iperf3 "$BENCH_PY"; do command -v "$tool" >/dev/null || bench_die "$tool not found"; done
[[ -x $BENCH_BUILD/bin/conduitd && -x $BENCH_BUILD/bin/conduit-series && -x $BENCH_BUILD/bin/conduitctl ]] ||
  bench_die "build conduitd, conduit-series and conduitctl first (cmake --build build)"

BG_PIDS=()
cleanup() {
  local p
  for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  bench_conduit_stop
  bench_cluster_down
  if ((KEEP)); then echo "# work dir kept: $BENCH_WORK" >&2; else rm -rf "$BENCH_WORK"; fi
}
trap cleanup EXIT

REPORT="$BENCH_WORK/report.md"
: >"$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }

ctl() { local h=$1; shift; "$BENCH_BUILD/bin/conduitctl" --socket "$BENCH_WORK/h$h-admin.sock" "$@"; }

# netns_up HOSTS "STRUCTURE" RATE_ARGS...: the namespaces plus the matching topology file
# (STRUCTURE: --racks/--mesh flags, shared by both).
netns_up() {
  local hosts=$1 structure=($2); shift 2
  "$BENCH_NETNS" up --hosts "$hosts" --prefix "$BENCH_PREFIX" --subnet "$BENCH_SUBNET" --queue "$QUEUE" \
    "${structure[@]}" "$@"
  "$BENCH_NETNS" topology --hosts "$hosts" --subnet "$BENCH_SUBNET" "${structure[@]}" >"$BENCH_WORK/topology.json"
}

# series LABEL SECONDS HOSTMAP [conduit-series args]: one job, rank r on host HOSTMAP[r]
# ("0 2 1 3"); started in the background. Sets SERIES_PIDS; rank 0 writes
# $BENCH_WORK/series-LABEL.out.
SERIES_PIDS=()
series() {
  local label=$1 seconds=$2 map=($3); shift 3
  local n=${#map[@]} idf="$BENCH_WORK/$label.id" r
  rm -f "$idf"
  for ((r = n - 1; r >= 0; r--)); do
    local h=${map[$r]} out=/dev/null
    ((r == 0)) && out="$BENCH_WORK/series-$label.out"
    CONDUIT_SOCKET="$BENCH_WORK/h$h.sock" ip netns exec "$(bench_ns "$h")" "${SERIES_BIN:-$BENCH_BUILD/bin/conduit-series}" \
      --rank "$r" --nranks "$n" --id-file "$idf" -b "$BYTES" --seconds "$seconds" --label "$label" "$@" \
      >"$out" 2>>"$BENCH_WORK/series-$label-rank$r.log" &
    SERIES_PIDS+=($!)
  done
}
series_wait() {
  local p rc=0
  for p in "${SERIES_PIDS[@]}"; do wait "$p" || rc=1; done
  SERIES_PIDS=()
  ((rc == 0)) || bench_log "a conduit-series rank failed (logs in $BENCH_WORK)"
}
# total LABEL: the summary algbw (MB/s) of a finished job.
total() { awk '/^total/ { for (i = 1; i <= NF; i++) if ($i ~ /^algbw_MBps=/) { sub("algbw_MBps=", "", $i); print $i } }' "$BENCH_WORK/series-$1.out"; }
wrong() { awk '/^total/ { for (i = 1; i <= NF; i++) if ($i ~ /^wrong=/) { sub("wrong=", "", $i); print $i } }' "$BENCH_WORK/series-$1.out"; }

# first_comm HOST: the key of the first ready communicator on HOST (waits up to 10 s).
first_comm() {
  local h=$1 n
  for ((n = 0; n < 100; n++)); do
    local key
    key=$(ctl "$h" --json comms | "$BENCH_PY" -c '
import json, sys
c = [x for x in json.load(sys.stdin)["communicators"] if x.get("ready")]
print(c[0]["key"] if c else "")')
    [[ -n $key ]] && { echo "$key"; return; }
    sleep 0.1
  done
  bench_die "no communicator appeared on h$h"
}
comm_json() { ctl "$1" comm "$2"; }
# ring_of HOST KEY: "h0>h1>h2>h3 crossings N" (namespace host names, from the addresses).
ring_of() {
  comm_json "$1" "$2" | "$BENCH_PY" -c '
import json, sys
c = json.load(sys.stdin)["config"]
names = ["h%d" % (int(a.split(":")[0].split(".")[3]) - 1) for a in c["ring_hosts"]]
print(">".join(names), "crossings", c.get("rack_crossings"))'
}
path_of() {  # path of host H's collective link to host PEER in comm KEY
  comm_json "$1" "$2" | "$BENCH_PY" -c "
import json,sys
for l in json.load(sys.stdin)['links']:
    if l['channel'] == 'collective' and l['host'] == $3: print(l['path'])"
}
mbit() { "$BENCH_PY" -c "print('%.0f' % ($1 * 8))"; }  # MB/s -> Mbit/s

# ------------------------------------------------------------------ case 1
case1() {
  say ""
  say "### Case 1: ring order across racks (4 hosts, 2 racks, inter-rack link $TRUNK_RATE, host links $HOST_RATE)"
  netns_up 4 "--racks 2" --rate "$HOST_RATE" --uplink-rate "$TRUNK_RATE"
  local trunk intra
  trunk=$(bench_iperf_pair 0 2)
  intra=$(bench_iperf_pair 0 1)
  say ""
  say "iperf3: inter-rack h0->h2 $trunk Gbit/s, intra-rack h0->h1 $intra Gbit/s. Ranks 0,1,2,3 on hosts h0,h2,h1,h3 (racks r0,r1,r0,r1); $((BYTES >> 20)) MiB float all-reduce, ${SECONDS_PER_RUN} s per run."
  bench_conduit_start 4 --topology "$BENCH_WORK/topology.json"
  say ""
  say "| ring | order used | rack crossings | algbw MB/s | algbw Mbit/s | wrong |"
  say "| --- | --- | --- | --- | --- | --- |"
  local order label key ring a_rank=0 a_loc=0
  for order in rank locality; do
    ctl 0 policy set ring "{\"order\": \"$order\"}" >/dev/null
    label="c1-$order"
    series "$label" "$SECONDS_PER_RUN" "0 2 1 3"
    key=$(first_comm 0)
    ring=$(ring_of 0 "$key")
    series_wait
    local bw; bw=$(total "$label")
    say "| $order | ${ring% crossings*} | ${ring##* } | $bw | $(mbit "$bw") | $(wrong "$label") |"
    [[ $order == rank ]] && a_rank=$bw || a_loc=$bw
  done
  say ""
  say "Locality-aware / rank order: **$("$BENCH_PY" -c "print('%.2fx' % ($a_loc / $a_rank))")** (MCCS: 1.6x on 4 GPUs, 2.4x on 8 GPUs with flow assignment, vs NCCL)."
  bench_conduit_stop
  bench_cluster_down
}

# bench_iperf_pair I J: Gbit/s from host I to host J on the primary network (3 s).
bench_iperf_pair() {
  local i=$1 j=$2 ipj json
  ipj=$(bench_ip "$j")
  ip netns exec "$(bench_ns "$j")" iperf3 -s -1 -B "$ipj" >/dev/null 2>&1 &
  local server=$!
  sleep 0.4
  json=$(ip netns exec "$(bench_ns "$i")" iperf3 -c "$ipj" -t 3 -J 2>/dev/null) || true
  wait "$server" 2>/dev/null || true
  "$BENCH_PY" -c 'import json,sys; print("%.3f" % (json.loads(sys.stdin.read())["end"]["sum_received"]["bits_per_second"] / 1e9))' <<<"$json"
}

# ------------------------------------------------------------------ case 2
case2() {
  say ""
  say "### Case 2: two tenants, two paths (2 hosts, 2 direct links of $PATH_RATE each)"
  netns_up 2 "--mesh 2" --mesh-rate "$PATH_RATE"
  BENCH_LISTEN_ANY=1 bench_conduit_start 2 --topology "$BENCH_WORK/topology.json"
  say ""
  say "Both tenants all-reduce $((BYTES >> 20)) MiB at once for ${SECONDS_PER_RUN} s (1 rank per host each)."
  say ""
  say "| assignment | tenant A path | tenant B path | A MB/s | B MB/s | aggregate MB/s | aggregate Mbit/s | Jain fairness | wrong |"
  say "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  local mode trial agg_single=0 agg_balance=0
  for mode in single hash hash hash balance; do
    for h in 0 1; do ctl "$h" policy set flows "{\"assignment\": \"$mode\"}" >/dev/null; done
    series "c2-$mode-A" "$SECONDS_PER_RUN" "0 1"
    local ka; ka=$(first_comm 1)
    series "c2-$mode-B" "$SECONDS_PER_RUN" "0 1"
    local kb=""
    for ((trial = 0; trial < 100; trial++)); do
      kb=$(ctl 1 --json comms | "$BENCH_PY" -c "
import json,sys
c=[x['key'] for x in json.load(sys.stdin)['communicators'] if x.get('ready') and x['key'] != '$ka']
print(c[0] if c else '')")
      [[ -n $kb ]] && break
      sleep 0.1
    done
    local pa pb
    pa=$(path_of 1 "$ka" 0); pb=$(path_of 1 "$kb" 0)
    series_wait
    local a b
    a=$(total "c2-$mode-A"); b=$(total "c2-$mode-B")
    local line
    line=$("$BENCH_PY" -c "
a, b = $a, $b
print('%.2f | %.0f | %.3f' % (a + b, (a + b) * 8, (a + b) ** 2 / (2 * (a * a + b * b))))")
    say "| $mode | $pa | $pb | $a | $b | $line | $(( $(wrong "c2-$mode-A") + $(wrong "c2-$mode-B") )) |"
    [[ $mode == single ]] && agg_single=$("$BENCH_PY" -c "print($a + $b)")
    [[ $mode == balance ]] && agg_balance=$("$BENCH_PY" -c "print($a + $b)")
  done
  say ""
  say "Aggregate with fair flow assignment / all on one path: **$("$BENCH_PY" -c "print('%.2fx' % ($agg_balance / $agg_single))")** (MCCS: FFA beats NCCL's ECMP by 75% on average in its multi-tenant setups, and ECMP gives 1.7:1 instead of the fair 2:1 in setup 3)."
  bench_conduit_stop
  bench_cluster_down
}

# ------------------------------------------------------------------ case 3
case3() {
  local total_s=$((SECONDS_PER_RUN * 2)) bg_at=$((SECONDS_PER_RUN * 2 / 5)) flip_at=$((SECONDS_PER_RUN * 4 / 5))
  say ""
  say "### Case 3: background flow on one direction of the ring, then reversal (4 hosts, ring of $PATH_RATE direct links)"
  netns_up 4 "--mesh 1" --mesh-rate "$PATH_RATE"
  BENCH_LISTEN_ANY=1 bench_conduit_start 4 --topology "$BENCH_WORK/topology.json" --ring-order rank --flow-assignment single
  local addrs src dst
  addrs=$("$BENCH_NETNS" mesh-ip 0 1 0 --hosts 4 --mesh 1 --subnet "$BENCH_SUBNET")
  src=${addrs% *}; dst=${addrs#* }
  # A quarter of -b, so even the slowed collectives fit several to the time series.
  series c3 "$total_s" "0 1 2 3" --interval-ms 1000 -b $((BYTES / 4))
  local key; key=$(first_comm 0)
  local start; start=$(date +%s.%N)
  say ""
  # 75% of the link, UDP (it does not back off, like MCCS's background flow), with a socket
  # buffer big enough that the sender's own queue cannot pace it.
  local bg_rate
  bg_rate=$("$BENCH_PY" -c "
import re
m = re.fullmatch(r'([0-9.]+)(bit|kbit|mbit|gbit)', '${PATH_RATE,,}')
print('%dK' % (float(m[1]) * {'bit': 1e-3, 'kbit': 1, 'mbit': 1e3, 'gbit': 1e6}[m[2]] * 0.75))")
  say "$((BYTES >> 22)) MiB float all-reduce; ring $(ring_of 0 "$key" | cut -d' ' -f1) on direct links; at ${bg_at} s: UDP iperf3 at ${bg_rate}bit/s h0->h1 on that link ($src -> $dst); at ${flip_at} s: \`conduitctl reconfigure KEY --ring reverse\` (asked on h2)."
  sleep "$bg_at"
  ip netns exec "$(bench_ns 1)" iperf3 -s -B "$dst" >/dev/null 2>&1 &
  BG_PIDS+=($!)
  sleep 0.3
  local bg_unix; bg_unix=$(date +%s.%N)
  ip netns exec "$(bench_ns 0)" iperf3 -c "$dst" -B "$src" -u -b "$bg_rate" -l 1400 -w 4M -t $((total_s)) \
    >"$BENCH_WORK/bg.log" 2>&1 &
  BG_PIDS+=($!)
  sleep $((flip_at - bg_at))
  local flip_unix; flip_unix=$(date +%s.%N)
  local flip; flip=$(ctl 2 reconfigure "$key" --ring reverse --wait-ms 60000 2>&1 | "$BENCH_PY" -c '
import json,sys
r = json.load(sys.stdin); print("epoch", r["epoch"], "applied", r["applied"], "ring", ">".join(map(str, r["config"]["ring"])))' || true)
  local flip_done; flip_done=$(date +%s.%N)
  series_wait
  local p; for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  BG_PIDS=()
  say "Reconfiguration answer: $flip (took $("$BENCH_PY" -c "print('%.0f ms' % (($flip_done - $flip_unix) * 1000))"))."
  say ""
  say "| interval (s) | phase | algbw MB/s | algbw Mbit/s |"
  say "| --- | --- | --- | --- |"
  "$BENCH_PY" - "$BENCH_WORK/series-c3.out" "$start" "$bg_unix" "$flip_done" <<'PY' | tee -a "$REPORT"
import sys
path, start, bg, flip = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
phases = {"clean": [], "background": [], "reversed": []}
prev = start
for line in open(path):
    if not line.startswith("series"):
        continue
    f = dict(kv.split("=") for kv in line.split()[2:])
    end, bw = float(f["unix"]), float(f["algbw_MBps"])
    # An interval belongs to a phase only if it lies inside it; those spanning the start of
    # the background flow or the reconfiguration are transitions, left out of the means.
    if end <= bg:
        phase = "clean"
    elif prev >= bg and end <= flip:
        phase = "background"
    elif prev >= flip:
        phase = "reversed"
    else:
        phase = "transition"
    phases.setdefault(phase, []).append(bw)
    print("| %.1f-%.1f | %s | %.2f | %.0f |" % (prev - start, end - start, phase, bw, bw * 8))
    prev = end
print()
mean = {k: sum(v) / len(v) if v else float("nan") for k, v in phases.items()}
print("Means: clean %.2f MB/s, with background %.2f MB/s, after reversal %.2f MB/s: "
      "background cut it to **%.0f%%**, reversal recovered **%.2fx** (MCCS: 5.9 -> 1.7 GB/s = 29%%, back to 5.9 GB/s = 3.5x)."
      % (mean["clean"], mean["background"], mean["reversed"], 100 * mean["background"] / mean["clean"],
         mean["reversed"] / mean["background"]))
PY
  say "Wrong elements: $(wrong c3)."
  bench_conduit_stop
  bench_cluster_down
}

# ------------------------------------------------------------------ case 4
case4() {
  say ""
  say "### Case 4: priority with time-window scheduling (2 hosts, one $PATH_RATE path shared by two tenants)"
  netns_up 2 "--mesh 1" --mesh-rate "$PATH_RATE"
  BENCH_LISTEN_ANY=1 bench_conduit_start 2 --topology "$BENCH_WORK/topology.json"
  cp "$BENCH_BUILD/bin/conduit-series" "$BENCH_WORK/prio-series"  # a tenant is named by its executable
  local gap=200
  say ""
  say "Tenant *prio* (executable prio-series, priority 1) all-reduces $((BYTES >> 20)) MiB then computes ${gap} ms, in a loop; tenant *bulk* (conduit-series) all-reduces back to back. ${SECONDS_PER_RUN} s each. algbw counts time inside collectives only."
  say ""
  say "| setting | prio algbw MB/s | prio collectives | bulk algbw MB/s | wrong |"
  say "| --- | --- | --- | --- | --- |"
  local setting
  for setting in alone shared yield; do
    for h in 0 1; do
      ctl "$h" policy set tenant prio '{"match": {"exe": "prio-series"}, "priority": 1}' >/dev/null
      if [[ $setting == yield ]]; then
        ctl "$h" policy set tenant bulk '{"match": {"exe": "conduit-series"}, "yield": true, "yield_max_ms": 1000}' >/dev/null
      else
        ctl "$h" policy rm tenant bulk >/dev/null 2>&1 || true
      fi
    done
    SERIES_BIN="$BENCH_WORK/prio-series" series "c4-$setting-prio" "$SECONDS_PER_RUN" "0 1" --gap-ms "$gap"
    [[ $setting == alone ]] || series "c4-$setting-bulk" "$SECONDS_PER_RUN" "0 1"
    series_wait
    local pc pw bulk="-" bw=0
    pc=$(awk '/^total/ { for (i = 1; i <= NF; i++) if ($i ~ /^colls=/) { sub("colls=", "", $i); print $i } }' "$BENCH_WORK/series-c4-$setting-prio.out")
    pw=$(wrong "c4-$setting-prio")
    if [[ $setting != alone ]]; then bulk=$(total "c4-$setting-bulk"); bw=$(wrong "c4-$setting-bulk"); fi
    say "| $setting | $(total "c4-$setting-prio") | $pc | $bulk | $((pw + bw)) |"
  done
  say ""
  say "(MCCS reports the effect on training time instead: PFA+TS speeds up the prioritized tenant B by 16% over PFA.)"
  bench_conduit_stop
  bench_cluster_down
}

say "## MCCS cases (tools/bench/mccs_bench.sh, $(date -u +%F), $(nproc) cores)"
for c in $CASES; do
  # Other work on the machine shares the CPU with every emulated host: say how much.
  bench_log "case $c: load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "" >>"$REPORT"
  echo "(load average when case $c started: $(cut -d' ' -f1-3 /proc/loadavg))" >>"$REPORT"
  case "$c" in
    1) case1 ;;
    2) case2 ;;
    3) case3 ;;
    4) case4 ;;
    *) bench_die "unknown case $c" ;;
  esac
done
[[ -z $OUT ]] || cp "$REPORT" "$OUT"
