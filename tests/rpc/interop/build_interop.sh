#!/bin/bash
# Builds gRPC's own interop test client and server (test/cpp/interop of the gRPC release
# Debian ships) against the system's gRPC, unmodified, for the interop tests under the
# preload. Sources come from Debian's source package (apt-get source, with a private
# deb-src list so the system's apt configuration is not touched).
#
#   build_interop.sh OUT_DIR      -> OUT_DIR/interop_client, OUT_DIR/interop_server
#
# Nothing of gRPC's is copied into this repository: the script fetches, compiles, links.
set -euo pipefail

out=$(realpath -m "${1:?usage: build_interop.sh OUT_DIR}")
version=$(dpkg-query -W -f='${source:Version}' libgrpc-dev 2>/dev/null || true)
[ -n "$version" ] || { echo "build_interop: libgrpc-dev is not installed" >&2; exit 1; }
upstream=${version%%-*}
src=$out/grpc-$upstream
mkdir -p "$out"

if [ ! -f "$out/interop_client" ] || [ ! -f "$out/interop_server" ] || [ "$(cat "$out/.version" 2>/dev/null)" != "$version" ]; then
  if [ ! -d "$src/test/cpp/interop" ]; then
    apt_dir=$out/apt
    mkdir -p "$apt_dir/parts" "$apt_dir/lists/partial"
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    cat > "$apt_dir/parts/deb-src.sources" <<SOURCES
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/parts"
              -o "Dir::State::Lists=$apt_dir/lists" -o APT::Sandbox::User=root)
    apt-get "${apt_opts[@]}" -qq update
    (cd "$out" && apt-get "${apt_opts[@]}" -qq source --download-only "grpc=$version")
    tar -C "$out" -xzf "$out/grpc_$upstream.orig.tar.gz" \
      "grpc-$upstream/test" "grpc-$upstream/src/proto" "grpc-$upstream/src/core" "grpc-$upstream/src/cpp" \
      "grpc-$upstream/include"
  fi

  gen=$out/gen
  mkdir -p "$gen" "$out/obj"
  protos=(src/proto/grpc/testing/empty.proto src/proto/grpc/testing/messages.proto src/proto/grpc/testing/test.proto)
  (cd "$src" && protoc -I. --cpp_out="$gen" --grpc_out="$gen" \
     --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "${protos[@]}")

  common=(
    test/cpp/util/create_test_channel.cc test/cpp/util/test_credentials_provider.cc test/cpp/util/test_config_cc.cc
    test/core/util/test_config.cc test/core/util/histogram.cc test/core/util/stack_tracer.cc test/core/util/build.cc
    test/core/event_engine/test_init.cc test/core/security/oauth2_utils.cc
    test/core/end2end/data/client_certs.cc test/core/end2end/data/server1_cert.cc
    test/core/end2end/data/server1_key.cc test/core/end2end/data/test_root_cert.cc
  )
  client=(test/cpp/interop/client.cc test/cpp/interop/interop_client.cc test/cpp/interop/client_helper.cc)
  server=(test/cpp/interop/interop_server.cc test/cpp/interop/interop_server_bootstrap.cc test/cpp/interop/server_helper.cc)
  generated=("$gen"/src/proto/grpc/testing/*.pb.cc)
  flags=(-std=c++17 -O1 -w -I"$gen" -I"$src" -I"$src/include" $(pkg-config --cflags grpc++ protobuf))
  libs=($(pkg-config --libs grpc++ grpc protobuf absl_flags_parse absl_flags absl_failure_signal_handler \
          absl_symbolize absl_stacktrace absl_str_format_internal absl_strings absl_synchronization absl_status \
          absl_statusor absl_time) -lgpr -lpthread)

  objects=()
  pids=()
  compile() {  # compile SRC -> object path (in the background, two at a time)
    local s=$1 o=$out/obj/$(echo "$1" | tr '/' '_').o
    objects+=("$o")
    if [ ! -f "$o" ] || [ "$s" -nt "$o" ]; then
      (cd "$src" && g++ "${flags[@]}" -c "$s" -o "$o") &
      pids+=($!)
      if [ ${#pids[@]} -ge "${INTEROP_JOBS:-$(nproc)}" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    fi
  }
  for s in "${common[@]}" "${client[@]}" "${server[@]}" "${generated[@]}"; do compile "$s"; done
  for p in "${pids[@]}"; do wait "$p"; done
  obj() { echo "$out/obj/$(echo "$1" | tr '/' '_').o"; }
  common_o=(); for s in "${common[@]}" "${generated[@]}"; do common_o+=("$(obj "$s")"); done
  client_o=(); for s in "${client[@]}"; do client_o+=("$(obj "$s")"); done
  server_o=(); for s in "${server[@]}"; do server_o+=("$(obj "$s")"); done
  g++ -o "$out/interop_client" "${client_o[@]}" "${common_o[@]}" "${libs[@]}"
  g++ -o "$out/interop_server" "${server_o[@]}" "${common_o[@]}" "${libs[@]}"
  echo "$version" > "$out/.version"
fi
echo "build_interop: $out/interop_client and $out/interop_server (gRPC $version)"
