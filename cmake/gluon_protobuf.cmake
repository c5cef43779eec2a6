# gluon_protobuf(NAME PROTO file.proto [GRPC]): generates the protobuf C++ code of file.proto (and
# with GRPC, gRPC C++'s stubs) into the binary directory, and makes NAME an object library of it
# whose users get the generated headers on their include path and protobuf (and grpc++) linked.
# Generated code is built without sanitizers: protobuf and gRPC are not instrumented.
function(gluon_protobuf name)
  cmake_parse_arguments(P "GRPC" "PROTO" "" ${ARGN})
  find_program(PROTOC protoc REQUIRED)
  find_package(Protobuf REQUIRED)
  get_filename_component(stem ${P_PROTO} NAME_WE)
  get_filename_component(dir ${CMAKE_CURRENT_SOURCE_DIR}/${P_PROTO} DIRECTORY)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/${name}_gen)
  file(MAKE_DIRECTORY ${gen})
  set(outs ${gen}/${stem}.pb.cc ${gen}/${stem}.pb.h)
  set(args --cpp_out=${gen})
  if(P_GRPC)
    # gRPC's CMake package, not pkg-config: resolving grpc++'s .pc (abseil's graph behind it)
    # takes pkg-config 2 s a call and pkg_check_modules a dozen calls, at every first configure.
    find_package(gRPC CONFIG REQUIRED)
    find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
    list(APPEND outs ${gen}/${stem}.grpc.pb.cc ${gen}/${stem}.grpc.pb.h)
    list(APPEND args --grpc_out=${gen} --plugin=protoc-gen-grpc=${GRPC_CPP_PLUGIN})
    set(lib gRPC::grpc++)
  else()
    set(lib protobuf::libprotobuf)
  endif()
  add_custom_command(OUTPUT ${outs}
    COMMAND ${PROTOC} -I ${dir} ${args} ${CMAKE_CURRENT_SOURCE_DIR}/${P_PROTO}
    DEPENDS ${P_PROTO})
  list(FILTER outs INCLUDE REGEX "\\.cc$")
  add_library(${name} STATIC ${outs})
  target_include_directories(${name} PUBLIC ${gen})
  target_link_libraries(${name} PUBLIC ${lib})
  set_property(TARGET ${name} PROPERTY COMPILE_OPTIONS "")
  set_property(TARGET ${name} PROPERTY POSITION_INDEPENDENT_CODE ON)
endfunction()
