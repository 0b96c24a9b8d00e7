# Debian packages, one per install component (cmake/ConduitInstall.cmake), built by
# `cpack -G DEB` in a build configured with -DCMAKE_INSTALL_PREFIX=/usr and
# -DCMAKE_BUILD_TYPE=Release (tools/package builds them that way):
#   conduit         conduitd, conduitctl, the systemd unit, /etc/conduit/conduitd.conf
#   conduit-nccl    the NCCL shim, in a private directory (never shadows NVIDIA's libnccl2)
#   conduit-grpc    the gRPC interposer
#   conduit-tools   conduit-perf (+ nccl-tests' names), hoplite-tool, the demo, benchmarks
#   libhoplite0     the object store client library;  libhoplite-dev  its headers, CMake, pkg-config
# Dependencies on Debian's libraries come from what the binaries link (dpkg-shlibdeps).
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  # GNUInstallDirs picks Debian's multiarch library directory only for /usr.
  message(STATUS "Debian packages (cpack) need -DCMAKE_INSTALL_PREFIX=/usr; this build installs to ${CMAKE_INSTALL_PREFIX}")
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME conduit)
set(CPACK_PACKAGE_VENDOR "Conduit")
set(CPACK_PACKAGE_CONTACT "Conduit developers <conduit@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "managed communication for unmodified distributed programs")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")  # 0.x: each release may change the ABI
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
# Our own libraries, which dpkg-shlibdeps cannot look up in the system's package database:
# the dependencies on the packages that carry them are declared below instead.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ${CMAKE_BINARY_DIR}/lib)
set(conduit_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")

set(CPACK_COMPONENTS_ALL)
if(CONDUIT_BUILD_DAEMON)
  list(APPEND CPACK_COMPONENTS_ALL daemon)
  set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME conduit)
  set(CPACK_COMPONENT_DAEMON_DESCRIPTION
      "Conduit daemon (conduitd) and operator CLI (conduitctl)\nOne trusted per-host service owns the buffers, picks the algorithms and enforces\noperator policy for NCCL collectives, gRPC calls and a distributed object store;\nprograms reach it through the shims in conduit-nccl, conduit-grpc and libhoplite0.")
  # passwd: groupadd in postinst (the operators' group for the admin socket).
  set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "passwd")
  set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
      ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles
      ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
      ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
      ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
  set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION ON)
endif()
if(CONDUIT_BUILD_NCCL)
  list(APPEND CPACK_COMPONENTS_ALL nccl tools)
  set(CPACK_DEBIAN_NCCL_PACKAGE_NAME conduit-nccl)
  set(CPACK_DEBIAN_NCCL_PACKAGE_SECTION libs)
  # No shlibs entry: it must never be what other packages' libnccl.so.2 dependency resolves to.
  set(CPACK_DEBIAN_NCCL_PACKAGE_GENERATE_SHLIBS OFF)
  set(CPACK_COMPONENT_NCCL_DESCRIPTION
      "Conduit's drop-in libnccl.so.2 (NCCL 2.28 API and ABI)\nForwards communicators and collectives to conduitd, or to NVIDIA's NCCL when no daemon\naccepts the program. Installed in a private directory, so it never shadows libnccl2:\nLD_PRELOAD=/usr/lib/<multiarch>/conduit/nccl/libnccl.so.2, or activate\n/usr/share/conduit/ld.so.conf.d/conduit-nccl.conf host-wide.")
  set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME conduit-tools)
  set(CPACK_COMPONENT_TOOLS_DESCRIPTION
      "Conduit benchmarks and demo programs\nconduit-perf (nccl-tests' flags; lib/<multiarch>/conduit/nccl-tests has nccl-tests' program\nnames), conduit-allreduce-demo, conduit-series, hoplite-bench, conduit-auth-bench, conduit-reduce-bench,\nconduit-copy-bench and the example gRPC pair conduit-rpc-bench and conduit-rpc-bench-server.")
  set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "conduit-nccl (= ${conduit_deb_version})")
  if(CONDUIT_BUILD_HOPLITE)
    string(APPEND CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS ", libhoplite0 (= ${conduit_deb_version})")
  endif()
endif()
if(CONDUIT_BUILD_GRPC)
  list(APPEND CPACK_COMPONENTS_ALL grpc)
  set(CPACK_DEBIAN_GRPC_PACKAGE_NAME conduit-grpc)
  set(CPACK_DEBIAN_GRPC_PACKAGE_SECTION libs)
  set(CPACK_DEBIAN_GRPC_PACKAGE_GENERATE_SHLIBS OFF)  # a preload module, nothing links it
  set(CPACK_COMPONENT_GRPC_DESCRIPTION
      "Conduit's gRPC interposer (LD_PRELOAD)\nHands an unmodified gRPC C++ program's insecure channels and ports to conduitd:\nLD_PRELOAD=/usr/lib/<multiarch>/conduit/libmrpc-grpc.so ./program")
  # It finds gRPC's functions in the program (dlsym RTLD_NEXT) and links none of gRPC, but
  # hands gRPC absl::Status objects built with the same libabsl_status.
endif()
if(CONDUIT_BUILD_HOPLITE)
  list(APPEND CPACK_COMPONENTS_ALL hoplite hoplite-dev)
  set(CPACK_DEBIAN_HOPLITE_PACKAGE_NAME libhoplite0)
  set(CPACK_DEBIAN_HOPLITE_PACKAGE_SECTION libs)
  set(CPACK_COMPONENT_HOPLITE_DESCRIPTION
      "Conduit's object store client library (Hoplite-style)\nPut/Get/Delete/Reduce/Wait of immutable objects across hosts, served by conduitd; C++ and\nC API; hoplite-tool for a quick try.")
  set(CPACK_DEBIAN_HOPLITE-DEV_PACKAGE_NAME libhoplite-dev)
  set(CPACK_DEBIAN_HOPLITE-DEV_PACKAGE_SECTION libdevel)
  set(CPACK_DEBIAN_HOPLITE-DEV_PACKAGE_ARCHITECTURE amd64)
  set(CPACK_DEBIAN_HOPLITE-DEV_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_HOPLITE-DEV_PACKAGE_DEPENDS "libhoplite0 (= ${conduit_deb_version})")
  set(CPACK_COMPONENT_HOPLITE-DEV_DESCRIPTION
      "Conduit's object store client library: development files\nHeaders (<conduit/hoplite.h>, <conduit/hoplite_c.h>), the CMake package\n(find_package(hoplite) -> hoplite::hoplite) and pkg-config file (hoplite).")
endif()

include(CPack)
