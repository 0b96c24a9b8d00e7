#!/usr/bin/env bash
# libhoplite as a user's project consumes it after `cmake --install` (anywhere): a C++
# program through the CMake package (find_package(hoplite) -> hoplite::hoplite) and a C
# program through pkg-config, both built against the installed headers and library only and
# run (their Connect to a missing daemon must fail with hoplite's own error); and the
# library's exported symbols are its public API and nothing else.
#
# usage: consumer_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
T=$(mktemp -d /tmp/conduit-consumer.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for c in hoplite hoplite-dev; do cmake --install "$BUILD" --prefix "$T/prefix" --component $c >/dev/null; done
lib=$(find "$T/prefix" -name libhoplite.so.0)
[ -n "$lib" ] || fail "libhoplite.so.0 was not installed"
[ "$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')" = libhoplite.so.0 ] || fail "SONAME is not libhoplite.so.0"

# Exports: hoplite_* (C) and hoplite:: (C++, with its classes' RTTI and vtables), nothing else.
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | c++filt |
  grep -vE '^(hoplite_[a-z_]+|hoplite::.*|(typeinfo|typeinfo name|vtable) for hoplite::.*)$' || true)
[ -z "$others" ] || fail "libhoplite exports more than its API: $others"

mkdir "$T/app"
cat > "$T/app/main.cc" <<'CC'
#include <conduit/hoplite.h>
#include <cstdio>
int main() {
  std::unique_ptr<hoplite::Client> client;
  hoplite::Status st = hoplite::Client::Connect(&client, "/nonexistent/conduitd.sock");
  std::printf("%s\n", st.ToString().c_str());
  return st.ok() ? 1 : 0;
}
CC
cat > "$T/app/main.c" <<'C'
#include <conduit/hoplite_c.h>
#include <stdio.h>
int main(void) {
  hoplite_client* c = NULL;
  char err[256] = "";
  int code = hoplite_connect("/nonexistent/conduitd.sock", &c, err, sizeof err);
  printf("%d %s\n", code, err);
  return code != 0 && err[0] != '\0' ? 0 : 1;
}
C
cat > "$T/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(hoplite_consumer CXX)
find_package(hoplite 0.1 CONFIG REQUIRED)
add_executable(app main.cc)
target_link_libraries(app PRIVATE hoplite::hoplite)
CM
cmake -S "$T/app" -B "$T/app/build" -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/cmake.log" 2>&1 &&
  cmake --build "$T/app/build" >>"$T/cmake.log" 2>&1 || { cat "$T/cmake.log"; fail "the CMake consumer does not build"; }
"$T/app/build/app" || fail "the CMake consumer did not get hoplite's error"

pc=$(dirname "$(find "$T/prefix" -name hoplite.pc)")
flags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs hoplite) || fail "pkg-config hoplite"
case $flags in *"$T/prefix"*) ;; *) fail "pkg-config does not point into the install prefix: $flags" ;; esac
# shellcheck disable=SC2086
cc -Wall -Werror -o "$T/app/c_app" "$T/app/main.c" $flags || fail "the pkg-config (C) consumer does not build"
LD_LIBRARY_PATH=$(dirname "$lib") "$T/app/c_app" || fail "the C consumer did not get hoplite's error"
echo "OK: CMake and pkg-config consumers of the installed libhoplite build and run; exports are the API only"
