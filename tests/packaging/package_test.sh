#!/usr/bin/env bash
# Conduit's Debian packages, as a user gets them: built by CPack from this build, installed
# with dpkg into a fresh Debian 12 root made by mmdebstrap (holding only what the packages
# declare they depend on), checked (layout, maintainer scripts, the NCCL shim not active by
# default, the systemd unit, tmpfiles), then the demo's all-reduce and a gRPC pair run from
# that root only: chrooted, in network namespaces, with nothing of the build tree in reach.
#
# usage: package_test.sh BUILD_DIR SOURCE_DIR   (root; exit 77 = skipped)
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
# shellcheck source=roots.sh
. "$SRC/tests/packaging/roots.sh"
pkg_require mmdebstrap cpack dpkg-deb systemd-analyze systemd-tmpfiles
pkg_require_usr_build "$BUILD"
WORK=$(mktemp -d /tmp/conduit-pkg.XXXXXX)
trap 'pkg_cleanup; rm -rf "$WORK"' EXIT

pkg_log "packages (cpack in $BUILD)"
pkg_build_debs "$BUILD" "$WORK/debs"
for p in conduit conduit-nccl conduit-grpc conduit-tools libhoplite0 libhoplite-dev; do
  ls "$WORK"/debs/${p}_*.deb >/dev/null 2>&1 || pkg_fail "no package $p"
done
deps=$(pkg_runtime_deps "$WORK"/debs/*.deb)
pkg_log "a fresh Debian root with the packages' dependencies: $deps"
ROOT=$WORK/root
# Plus systemd (and procps' /bin/kill, the unit's ExecReload), as on a host that runs the unit.
pkg_debian_root "$ROOT" "$deps,systemd,procps"

pkg_log "dpkg -i"
mkdir -p "$ROOT/tmp/debs"
cp "$WORK"/debs/*.deb "$ROOT/tmp/debs/"
chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c 'dpkg -i /tmp/debs/*.deb' >"$WORK/dpkg.log" 2>&1 ||
  { cat "$WORK/dpkg.log"; pkg_fail "dpkg -i failed"; }
chroot "$ROOT" dpkg --audit >"$WORK/audit.log" 2>&1 && [ ! -s "$WORK/audit.log" ] ||
  { cat "$WORK/audit.log"; pkg_fail "dpkg --audit found broken packages"; }
rm -rf "$ROOT/tmp/debs"

pkg_log "layout and maintainer scripts"
libdir=$(cd "$ROOT" && ls -d usr/lib/*-linux-gnu/conduit/nccl) || pkg_fail "no private NCCL directory"
libdir=${libdir%/conduit/nccl}
for f in usr/bin/conduitd usr/bin/conduitctl usr/bin/hoplite-tool usr/bin/conduit-perf \
         "$libdir/conduit/nccl/libnccl.so.2" "$libdir/conduit/libmrpc-grpc.so" "$libdir/libhoplite.so.0" \
         "$libdir/libhoplite.so" "$libdir/pkgconfig/hoplite.pc" "$libdir/cmake/hoplite/hopliteConfig.cmake" \
         "$libdir/conduit/nccl-tests/all_reduce_perf" usr/include/conduit/hoplite.h usr/include/conduit/hoplite_c.h \
         usr/lib/systemd/system/conduitd.service usr/lib/tmpfiles.d/conduit.conf etc/conduit/conduitd.conf \
         usr/share/conduit/ld.so.conf.d/conduit-nccl.conf; do
  [ -e "$ROOT/$f" ] || pkg_fail "/$f is not installed"
done
grep -q /etc/conduit/conduitd.conf <<<"$(chroot "$ROOT" dpkg-query -W -f='${Conffiles}\n' conduit)" ||
  pkg_fail "/etc/conduit/conduitd.conf is not a conffile"
chroot "$ROOT" getent group conduit >/dev/null || pkg_fail "postinst did not create the group conduit"
# The shim must not replace NVIDIA's libnccl.so.2 for every program unless an admin says so.
! grep -q 'libnccl\.so' <<<"$(chroot "$ROOT" ldconfig -p)" || pkg_fail "libnccl.so.2 is in the dynamic linker's cache"
! grep -rqs "conduit" "$ROOT/etc/ld.so.conf.d/" || pkg_fail "an ld.so.conf.d snippet is active"
pkg_mount_proc "$ROOT"
chroot "$ROOT" /usr/bin/conduit-perf --help >/dev/null || pkg_fail "conduit-perf does not start"
chroot "$ROOT" /usr/bin/hoplite-tool --help >/dev/null || pkg_fail "hoplite-tool does not start"

pkg_log "systemd: the unit verifies, tmpfiles makes the socket directory"
systemd-analyze verify --root="$ROOT" conduitd.service >"$WORK/verify.log" 2>&1 ||
  { cat "$WORK/verify.log"; pkg_fail "systemd-analyze verify conduitd.service"; }
! grep -q . "$WORK/verify.log" || { cat "$WORK/verify.log"; pkg_fail "systemd-analyze verify printed warnings"; }
systemd-tmpfiles --root="$ROOT" --create conduit.conf
gid=$(chroot "$ROOT" getent group conduit | cut -d: -f3)
[ "$(stat -c '%a %g' "$ROOT/run/conduit")" = "2755 $gid" ] ||
  pkg_fail "/run/conduit is $(stat -c '%a %g' "$ROOT/run/conduit"), not 2755 with group conduit ($gid)"

# What a user's job sets: the interposer preloaded (the demo links the shim by its RPATH).
PKG_JOB_ENV=(LD_PRELOAD="/$libdir/conduit/libmrpc-grpc.so")
pkg_run_demo "$ROOT" "$ROOT" cpkg 10.96.0
pkg_log "OK: the packages install into a fresh Debian root and serve the demo from it"
