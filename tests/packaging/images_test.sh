#!/usr/bin/env bash
# Conduit's container images, built as a user would (packaging/containers/build-images:
# mmdebstrap base, podman build --isolation=chroot, this build's Debian packages), then run
# without a container runtime (these machines lack the cgroup controllers one needs): each
# image's root filesystem is mounted (podman image mount) and the demo runs from those roots,
# daemons chrooted into the daemon image, the job's programs into the job image with the
# image's own environment (its preload), the host's socket directory bind-mounted into both.
#
# usage: images_test.sh BUILD_DIR SOURCE_DIR   (root; exit 77 = skipped)
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
# shellcheck source=roots.sh
. "$SRC/tests/packaging/roots.sh"
pkg_require mmdebstrap cpack podman
pkg_require_usr_build "$BUILD"
WORK=$(mktemp -d /tmp/conduit-img.XXXXXX)
# A private image store, gone with the test.
PODMAN=(podman --root "$WORK/storage" --runroot "$WORK/runroot" --storage-driver vfs)
trap 'pkg_cleanup; "${PODMAN[@]}" image unmount --all >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

pkg_log "packages (cpack in $BUILD)"
pkg_build_debs "$BUILD" "$WORK/debs"
pkg_log "images"
"$SRC/packaging/containers/build-images" --debs "$WORK/debs" --version test --job-extra conduit-tools \
  -- "${PODMAN[@]:1}" | tee "$WORK/sizes.txt"

DROOT=$("${PODMAN[@]}" image mount conduit/conduitd:test)
JROOT=$("${PODMAN[@]}" image mount conduit/job:test)
[ -x "$DROOT/usr/bin/conduitd" ] || pkg_fail "no conduitd in the daemon image"
[ ! -e "$DROOT/usr/bin/conduit-perf" ] || pkg_fail "the daemon image carries the tools"
[ ! -e "$JROOT/usr/bin/conduitd" ] || pkg_fail "the job image carries the daemon"
entry=$("${PODMAN[@]}" image inspect --format '{{json .Config.Entrypoint}}' conduit/conduitd:test)
[ "$entry" = '["/usr/bin/conduitd","--config","/etc/conduit/conduitd.conf"]' ] ||
  pkg_fail "the daemon image's entrypoint is $entry"

# The job image's own environment: the preload it turns on and the default socket.
mapfile -t PKG_JOB_ENV < <("${PODMAN[@]}" image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' conduit/job:test |
  grep -E '^(LD_PRELOAD|CONDUIT_SOCKET)=')
grep -q '^LD_PRELOAD=.*libnccl\.so\.2.*libmrpc-grpc\.so' <<<"$(printf '%s\n' "${PKG_JOB_ENV[@]}")" ||
  pkg_fail "the job image does not preload the shims: ${PKG_JOB_ENV[*]}"
for lib in $(printf '%s\n' "${PKG_JOB_ENV[@]}" | sed -n 's/^LD_PRELOAD=//p' | tr ':' ' '); do
  [ -e "$JROOT$lib" ] || pkg_fail "the job image preloads $lib, which it does not have"
done

pkg_run_demo "$DROOT" "$JROOT" cimg 10.97.0
pkg_log "OK: both images serve the demo from their roots"
cat "$WORK/sizes.txt"
