# Shared by the packaging tests (sourced): Debian roots made with mmdebstrap, Conduit's
# packages, and the demo run from such roots, daemons and programs chrooted into them inside
# network namespaces. Nothing from the build tree is visible there.
#
# Callers set WORK (a scratch directory they own) and call pkg_cleanup on exit.

PKG_MOUNTS=()   # mount points to take down, innermost last
PKG_PIDS=()     # processes to kill
PKG_NETNS=""    # namespace prefix to take down
PKG_JOB_ENV=()  # environment of the job's programs (the preload), NAME=VALUE each

pkg_log() { echo "[$(date +%T)] $*"; }
pkg_fail() { echo "FAIL: $*" >&2; exit 1; }

# Skips (exit 77, ctest's SKIP_RETURN_CODE) when the machine cannot run these tests.
pkg_require() {
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (chroot, mounts, network namespaces)"; exit 77; }
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (tools/install-deps installs it)"; exit 77; }
  done
  ip netns add conduit-pkg-probe-$$ 2>/dev/null || { echo "SKIP: cannot create network namespaces"; exit 77; }
  ip netns del conduit-pkg-probe-$$
}

# pkg_require_usr_build BUILD: the packages are made from BUILD, which must install to /usr.
pkg_require_usr_build() {
  grep -qx "CMAKE_INSTALL_PREFIX:PATH=/usr" "$1/CMakeCache.txt" ||
    pkg_fail "$1 is not configured with -DCMAKE_INSTALL_PREFIX=/usr (the packages install there)"
}

pkg_cleanup() {
  local pid i proc
  for pid in "${PKG_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${PKG_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  # Whatever still runs chrooted into one of our roots (a program a test started and lost).
  for proc in /proc/[0-9]*; do
    case $(readlink "$proc/root" 2>/dev/null) in "$WORK"/*) kill -KILL "${proc#/proc/}" 2>/dev/null || true ;; esac
  done
  for ((i = ${#PKG_MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${PKG_MOUNTS[$i]}" 2>/dev/null || true; done
  [ -n "$PKG_NETNS" ] && "$SRC/tools/netns/conduit-netns" down --prefix "$PKG_NETNS" >/dev/null 2>&1 || true
}

# pkg_build_debs BUILD_DIR OUT_DIR: the packages of a configured build (cpack).
pkg_build_debs() {
  mkdir -p "$2"
  (cd "$1" && cpack -G DEB -B "$2/cpack" >"$2/cpack.log" 2>&1) || { tail -30 "$2/cpack.log"; pkg_fail "cpack failed"; }
  mv "$2"/cpack/*.deb "$2"/
  ls "$2"/*.deb >/dev/null || pkg_fail "cpack made no packages"
}

# pkg_runtime_deps DEB...: the Debian packages they depend on (ours left out), comma-separated.
pkg_runtime_deps() {
  local own
  own=$(for d in "$@"; do dpkg-deb -f "$d" Package; done | paste -sd'|')
  for d in "$@"; do dpkg-deb -f "$d" Depends; done | tr ',' '\n' | sed 's/(.*)//; s/ //g' | grep -v '^$' |
    grep -vxE "$own" | sort -u | paste -sd,
}

# pkg_debian_root OUT [PACKAGES]: a minimal Debian 12 (bookworm) with PACKAGES (comma-separated)
# as a directory or, for OUT ending in .tar, a tarball.
pkg_debian_root() {
  local include=()
  [ -n "${2:-}" ] && include=(--include="$2")
  mmdebstrap --quiet --variant=minbase "${include[@]}" bookworm "$1" >"$WORK/mmdebstrap.log" 2>&1 ||
    { tail -20 "$WORK/mmdebstrap.log"; pkg_fail "mmdebstrap failed"; }
}

# pkg_mount_proc ROOT: /proc inside ROOT ($ORIGIN in a program's RUNPATH, which points Conduit's
# programs at the private NCCL shim, is resolved through /proc/self/exe).
pkg_mount_proc() {
  mountpoint -q "$1/proc" || { mount -t proc proc "$1/proc" && PKG_MOUNTS+=("$1/proc"); }
}

# pkg_mount_root ROOT SOCKDIR: /proc, /dev and the host's socket directory (as a DaemonSet's
# hostPath would be) inside ROOT.
pkg_mount_root() {
  local root=$1 sock=$2
  pkg_mount_proc "$root"
  mount --bind /dev "$root/dev" && PKG_MOUNTS+=("$root/dev")
  mkdir -p "$root/run/conduit"
  mount --bind "$sock" "$root/run/conduit" && PKG_MOUNTS+=("$root/run/conduit")
}

# pkg_in HOST ROOT CMD...: CMD on test host HOST (0, 1), chrooted into ROOT, with an empty
# environment but PATH (no LD_LIBRARY_PATH, nothing of the build tree). With PKG_EXEC set
# the shell execs it.
pkg_in() {
  ${PKG_EXEC:+exec} ip netns exec "$PKG_NETNS-h$1" chroot "$2" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${@:3}"
}
# pkg_in_bg LOG HOST ROOT CMD...: pkg_in in the background, killed by pkg_cleanup; its
# subshell execs the command, so $! is the program's own pid.
pkg_in_bg() {
  local log=$1
  shift
  (PKG_EXEC=1 pkg_in "$@") >"$log" 2>&1 &
  PKG_PIDS+=($!)
}

# pkg_run_demo DAEMON_ROOT JOB_ROOT PREFIX SUBNET: two hosts; conduitd from DAEMON_ROOT on
# each (its packaged configuration, flags for what differs per host), then from JOB_ROOT, with
# PKG_JOB_ENV, the demo's 4-rank all-reduce through the packaged NCCL shim and the example gRPC
# pair under the packaged interposer, both checked to have been carried by the daemons.
pkg_run_demo() {
  local droot=$1 jroot=$2 subnet=$4 h r
  PKG_NETNS=$3
  mkdir -p "$WORK/sock"
  chmod 2755 "$WORK/sock"
  pkg_mount_root "$droot" "$WORK/sock"
  [ "$jroot" != "$droot" ] && pkg_mount_root "$jroot" "$WORK/sock"
  "$SRC/tools/netns/conduit-netns" up --hosts 2 --prefix "$PKG_NETNS" --subnet "$subnet" >/dev/null

  pkg_log "cluster key and two daemons from $droot"
  chroot "$droot" /usr/bin/conduitctl keygen /etc/conduit/cluster.key
  for h in 0 1; do
    pkg_in_bg "$WORK/conduitd-h$h.log" $h "$droot" /usr/bin/conduitd --config /etc/conduit/conduitd.conf \
      --socket /run/conduit/h$h.sock --admin-socket /run/conduit/h$h-admin.sock \
      --listen "$subnet.$((h + 1)):7650" --cluster-key /etc/conduit/cluster.key --timeout-ms 20000
  done
  for h in 0 1; do
    for _ in $(seq 200); do [ -S "$WORK/sock/h$h-admin.sock" ] && break; sleep 0.05; done
    [ -S "$WORK/sock/h$h-admin.sock" ] || { cat "$WORK/conduitd-h$h.log"; pkg_fail "conduitd on host $h did not start"; }
  done

  pkg_log "all-reduce demo, 4 ranks on 2 hosts, from $jroot"
  local libs
  libs=$(chroot "$jroot" /usr/bin/ldd /usr/bin/conduit-allreduce-demo)
  grep -q '/conduit/nccl/libnccl.so.2' <<<"$libs" || pkg_fail "conduit-allreduce-demo does not load the packaged shim: $libs"
  local pids=()
  rm -f "$jroot/tmp/demo.id"
  for r in 0 1 2 3; do
    h=$((r / 2))
    pkg_in $h "$jroot" "${PKG_JOB_ENV[@]}" CONDUIT_SOCKET=/run/conduit/h$h.sock \
      timeout 60 /usr/bin/conduit-allreduce-demo --rank $r --nranks 4 --id-file /tmp/demo.id >"$WORK/rank$r.log" 2>&1 &
    pids+=($!)
  done
  local status=0
  for r in 0 1 2 3; do wait "${pids[$r]}" || { status=1; echo "--- rank $r:"; cat "$WORK/rank$r.log"; }; done
  [ $status -eq 0 ] || { cat "$WORK"/conduitd-h*.log; pkg_fail "the demo's all-reduce failed"; }
  cat "$WORK/rank0.log"
  # The daemons carried it: the shim's only other way is the native NCCL, and these roots have none.
  local others
  others=$(cd "$jroot" && find usr lib* opt -name 'libnccl.so*' 2>/dev/null | grep -v '/conduit/nccl/' || true)
  [ -z "$others" ] || pkg_fail "$jroot has another NCCL the demo may have fallen back to: $others"

  pkg_log "gRPC pair under the interposer (${PKG_JOB_ENV[*]}), from $jroot"
  for h in 0 1; do
    pkg_in $h "$droot" /usr/bin/conduitctl --socket /run/conduit/h$h-admin.sock policy set rpc-metrics '{}' >/dev/null
  done
  pkg_in_bg "$WORK/rpc-server.log" 1 "$jroot" "${PKG_JOB_ENV[@]}" CONDUIT_SOCKET=/run/conduit/h1.sock \
    /usr/bin/conduit-rpc-bench-server --listen 0.0.0.0:50061
  sleep 1
  pkg_in 0 "$jroot" "${PKG_JOB_ENV[@]}" CONDUIT_SOCKET=/run/conduit/h0.sock timeout 60 \
    /usr/bin/conduit-rpc-bench --target "$subnet.2:50061" --seconds 1 --warmup 0 >"$WORK/rpc-client.log" 2>&1 ||
    { cat "$WORK/rpc-client.log" "$WORK/rpc-server.log"; pkg_fail "the gRPC client failed"; }
  cat "$WORK/rpc-client.log"
  grep -qE "^calls [1-9][0-9]* .* errors 0$" "$WORK/rpc-client.log" || pkg_fail "the gRPC client made no calls or saw errors"
  pkg_in 0 "$droot" /usr/bin/conduitctl --socket /run/conduit/h0-admin.sock metrics |
    grep -E '^conduit_rpc_calls_total\{.*code="OK".*\} [1-9]' >/dev/null ||
    { cat "$WORK/rpc-client.log"; pkg_fail "conduitd on host 0 carried no gRPC call (did the interposer fall back?)"; }
}
