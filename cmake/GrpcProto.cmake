# conduit_grpc_proto(TARGET PROTO): a static library with the C++ code of PROTO and of its
# gRPC services, generated the normal gRPC way (protoc + grpc_cpp_plugin from Debian), and
# the descriptor set <name>.desc (next to the directory's programs) an operator hands conduitd for field-based policies.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_program(CONDUIT_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

function(conduit_grpc_proto target proto)
  get_filename_component(name ${proto} NAME_WE)
  get_filename_component(dir ${proto} DIRECTORY)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/gen)
  set(desc ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/${name}.desc)
  add_custom_command(
    OUTPUT ${gen}/${name}.pb.cc ${gen}/${name}.pb.h ${gen}/${name}.grpc.pb.cc ${gen}/${name}.grpc.pb.h
    COMMAND ${CMAKE_COMMAND} -E make_directory ${gen}
    COMMAND protobuf::protoc --proto_path=${dir} --cpp_out=${gen} --grpc_out=${gen}
            --plugin=protoc-gen-grpc=${CONDUIT_GRPC_CPP_PLUGIN} ${proto}
    DEPENDS ${proto}
    COMMENT "protoc ${name}.proto")
  add_custom_command(
    OUTPUT ${desc}
    COMMAND protobuf::protoc --proto_path=${dir} --include_imports --descriptor_set_out=${desc} ${proto}
    DEPENDS ${proto})
  add_custom_target(${target}_descriptor ALL DEPENDS ${desc})
  add_library(${target} STATIC ${gen}/${name}.pb.cc ${gen}/${name}.grpc.pb.cc)
  target_include_directories(${target} PUBLIC ${gen})
  target_link_libraries(${target} PUBLIC gRPC::grpc++ protobuf::libprotobuf)
  add_dependencies(${target} ${target}_descriptor)
endfunction()
