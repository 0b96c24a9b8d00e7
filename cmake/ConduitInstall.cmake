# What `cmake --install` puts where, by component; the Debian packages are these components
# (cmake/ConduitPackaging.cmake). Layout under the prefix (/usr in the packages):
#   bin/                       conduitd, conduitctl, hoplite-tool, conduit-perf, benchmarks
#   lib/<multiarch>/conduit/nccl/libnccl.so.2
#                              the NCCL shim, private so it never shadows NVIDIA's libnccl2:
#                              programs opt in with LD_PRELOAD or LD_LIBRARY_PATH, or an admin
#                              activates share/conduit/ld.so.conf.d/conduit-nccl.conf
#   lib/<multiarch>/conduit/libmrpc-grpc.so   the gRPC interposer (LD_PRELOAD only)
#   lib/<multiarch>/conduit/nccl-tests/*_perf nccl-tests' program names for conduit-perf
#   lib/<multiarch>/libhoplite.so.0           the object store client (+ -dev: headers under
#                              include/conduit/, libhoplite.so, CMake package, pkg-config)
#   lib/systemd/system, lib/tmpfiles.d, /etc/conduit (packaging/)
set(CONDUIT_PRIVATE_LIBDIR ${CMAKE_INSTALL_LIBDIR}/conduit)
set(CONDUIT_NCCL_LIBDIR ${CONDUIT_PRIVATE_LIBDIR}/nccl)
set(CONDUIT_SHAREDIR ${CMAKE_INSTALL_DATADIR}/conduit)
# /etc even under /usr (GNUInstallDirs maps SYSCONFDIR to /etc only for that prefix).
set(CONDUIT_SYSCONFDIR ${CMAKE_INSTALL_FULL_SYSCONFDIR}/conduit)

# `cmake --build build --target programs`: everything a user runs (what gets installed),
# without the tests.
add_custom_target(programs)

# conduit_install_programs(COMPONENT comp [RPATH dir] targets...)
function(conduit_install_programs)
  cmake_parse_arguments(P "" "COMPONENT;RPATH" "" ${ARGN})
  foreach(t ${P_UNPARSED_ARGUMENTS})
    if(P_RPATH)
      set_target_properties(${t} PROPERTIES INSTALL_RPATH ${P_RPATH})
    endif()
    install(TARGETS ${t} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${P_COMPONENT})
    add_dependencies(programs ${t})
  endforeach()
endfunction()

if(CONDUIT_BUILD_DAEMON)
  conduit_install_programs(COMPONENT daemon conduitd conduitctl)
  install(FILES packaging/conduitd.service DESTINATION lib/systemd/system COMPONENT daemon)
  install(FILES packaging/tmpfiles.conf DESTINATION lib/tmpfiles.d RENAME conduit.conf COMPONENT daemon)
  install(FILES packaging/conduitd.conf DESTINATION ${CONDUIT_SYSCONFDIR} COMPONENT daemon)
endif()

if(CONDUIT_BUILD_NCCL)
  # No libnccl.so link-time name: programs build against NVIDIA's headers and library and
  # only run on ours.
  install(TARGETS mccs_nccl LIBRARY DESTINATION ${CONDUIT_NCCL_LIBDIR} COMPONENT nccl NAMELINK_SKIP)
  add_dependencies(programs mccs_nccl)
  configure_file(packaging/conduit-nccl.ld.conf.in ${CMAKE_CURRENT_BINARY_DIR}/packaging/conduit-nccl.conf @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/packaging/conduit-nccl.conf
          DESTINATION ${CONDUIT_SHAREDIR}/ld.so.conf.d COMPONENT nccl)
  # Programs linked against the shim find it in its private directory, relative to their
  # own (so any --prefix works).
  file(RELATIVE_PATH bin_to_nccl /p/${CMAKE_INSTALL_BINDIR} /p/${CONDUIT_NCCL_LIBDIR})
  conduit_install_programs(COMPONENT tools RPATH "$ORIGIN/${bin_to_nccl}"
                           conduit-perf conduit-series allreduce_demo)
  # nccl-tests' program names: conduit-perf picks the collective by the name it runs under.
  file(RELATIVE_PATH tests_to_bin /p/${CONDUIT_PRIVATE_LIBDIR}/nccl-tests /p/${CMAKE_INSTALL_BINDIR})
  foreach(name all_reduce_perf all_gather_perf broadcast_perf reduce_perf reduce_scatter_perf
               alltoall_perf sendrecv_perf gather_perf scatter_perf hypercube_perf)
    install(CODE "
      set(dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CONDUIT_PRIVATE_LIBDIR}/nccl-tests\")
      file(MAKE_DIRECTORY \"\${dir}\")
      file(CREATE_LINK ${tests_to_bin}/conduit-perf \"\${dir}/${name}\" SYMBOLIC)"
      COMPONENT tools)
  endforeach()
endif()

if(CONDUIT_BUILD_GRPC)
  install(TARGETS mrpc_grpc LIBRARY DESTINATION ${CONDUIT_PRIVATE_LIBDIR} COMPONENT grpc)
  add_dependencies(programs mrpc_grpc)
  if(CONDUIT_BUILD_TOOLS)
    conduit_install_programs(COMPONENT tools rpc_bench rpc_bench_server)
  endif()
endif()

if(CONDUIT_BUILD_TOOLS)
  conduit_install_programs(COMPONENT tools conduit-auth-bench conduit-reduce-bench conduit-copy-bench)
endif()

if(CONDUIT_BUILD_HOPLITE)
  install(TARGETS hoplite EXPORT hopliteTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT hoplite NAMELINK_COMPONENT hoplite-dev
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  add_dependencies(programs hoplite)
  conduit_install_programs(COMPONENT tools hoplite-tool)
  if(CONDUIT_BUILD_TOOLS)
    conduit_install_programs(COMPONENT tools hoplite-bench)
  endif()
  install(FILES include/conduit/hoplite.h include/conduit/hoplite_c.h include/conduit/hoplite_export.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/conduit COMPONENT hoplite-dev)

  # find_package(hoplite CONFIG) -> hoplite::hoplite
  include(CMakePackageConfigHelpers)
  set(cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/hoplite)
  install(EXPORT hopliteTargets NAMESPACE hoplite:: DESTINATION ${cmake_dir} COMPONENT hoplite-dev)
  configure_package_config_file(packaging/hopliteConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/packaging/hopliteConfig.cmake INSTALL_DESTINATION ${cmake_dir})
  write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/packaging/hopliteConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)  # 0.x: minor versions may break the ABI
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/packaging/hopliteConfig.cmake
                ${CMAKE_CURRENT_BINARY_DIR}/packaging/hopliteConfigVersion.cmake
          DESTINATION ${cmake_dir} COMPONENT hoplite-dev)
  # pkg-config --cflags --libs hoplite
  file(RELATIVE_PATH PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  configure_file(packaging/hoplite.pc.in ${CMAKE_CURRENT_BINARY_DIR}/packaging/hoplite.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/packaging/hoplite.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT hoplite-dev)
endif()
