# Install rules: `cmake --install build --prefix PREFIX` gives
#
#   PREFIX/include/rdmarpc/*.hpp                  the public headers: #include <rdmarpc/channel.hpp>
#   PREFIX/include/rdmarpc/{rpc,transport,verbs,log}/...   the headers those include
#   PREFIX/include/rdmarpc/*.proto                the framework's own .proto files
#   PREFIX/include/rdmarpc/grpc/{health,reflection}/v1/*.proto, *.pb.h   the built-in services'
#                                                 protos and generated code (rdmarpc::services)
#   PREFIX/lib/librdmarpc_*.a (.so with -DBUILD_SHARED_LIBS=ON)
#   PREFIX/bin/protoc-gen-rdmarpc                 the protoc plugin rdmarpc_generate() runs
#   PREFIX/lib/cmake/rdmarpc/                     find_package(rdmarpc CONFIG): rdmarpc::rdmarpc,
#                                                 rdmarpc::protoc-gen-rdmarpc, rdmarpc_generate()
#   PREFIX/lib/pkgconfig/rdmarpc.pc               pkg-config --cflags --libs rdmarpc
#
# Header layout. The library's own headers include each other without a prefix
# ("transport/connection.hpp"), as they do in the source tree; rewriting the ~430 includes of the
# tree would touch every file for no behaviour. So the headers are installed under include/rdmarpc/
# in their source folders and users get two include roots: include/ (for <rdmarpc/...>) and
# include/rdmarpc/ (so those internal includes resolve). Users include only <rdmarpc/*.hpp>: the
# thin headers of include/rdmarpc/ in the source tree, which work the same in the build tree
# (after add_subdirectory) and installed.

include(CMakePackageConfigHelpers)

set(RDMARPC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/rdmarpc CACHE STRING
  "Where the CMake package (rdmarpcConfig.cmake) is installed, relative to the prefix")

# Exported as rdmarpc::<name>; users link rdmarpc::rdmarpc, the rest come along.
set_target_properties(rdmarpc_rpc PROPERTIES EXPORT_NAME rpc)
set_target_properties(rdmarpc_transport PROPERTIES EXPORT_NAME transport)
set_target_properties(rdmarpc_verbs PROPERTIES EXPORT_NAME verbs)
set_target_properties(rdmarpc_proto PROPERTIES EXPORT_NAME proto)
set_target_properties(rdmarpc_log PROPERTIES EXPORT_NAME log)
set_target_properties(rdmarpc_asio PROPERTIES EXPORT_NAME asio)
set_target_properties(rdmarpc_headers PROPERTIES EXPORT_NAME headers)
set_target_properties(rdmarpc_services PROPERTIES EXPORT_NAME services)  # opt-in: health, reflection

# Shared libraries (BUILD_SHARED_LIBS) find each other where they are installed: a program's own
# RUNPATH does not serve the libraries it loads (librdmarpc_rpc.so needs librdmarpc_proto.so).
set_target_properties(rdmarpc_rpc rdmarpc_transport rdmarpc_verbs rdmarpc_proto rdmarpc_log rdmarpc_asio
  rdmarpc_services PROPERTIES INSTALL_RPATH "$ORIGIN")

install(TARGETS rdmarpc rdmarpc_rpc rdmarpc_transport rdmarpc_verbs rdmarpc_proto rdmarpc_log rdmarpc_asio
                rdmarpc_services rdmarpc_headers protoc-gen-rdmarpc
  EXPORT rdmarpcTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/rdmarpc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp")
foreach(dir IN ITEMS rpc transport verbs log services)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rdmarpc
    FILES_MATCHING PATTERN "*.hpp")
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/proto/rdmarpc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.proto")
# grpc.health.v1 and grpc.reflection.v1: the .proto files and their generated code under
# include/rdmarpc/grpc/..., so "grpc/health/v1/health.rdmarpc.pb.h" resolves from the include/rdmarpc/
# root every user already has, and the protos import as "grpc/health/v1/health.proto" from
# RDMARPC_SERVICES_PROTO_DIR. Not under include/grpc/: that is gRPC's own header folder.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/proto/grpc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rdmarpc
  FILES_MATCHING PATTERN "*.proto")
install(DIRECTORY ${RDMARPC_SERVICES_GENERATED_DIR}/grpc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rdmarpc
  FILES_MATCHING PATTERN "*.h")

install(EXPORT rdmarpcTargets NAMESPACE rdmarpc:: DESTINATION ${RDMARPC_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rdmarpcConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rdmarpcConfig.cmake INSTALL_DESTINATION ${RDMARPC_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# 0.x: only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rdmarpcConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rdmarpcConfig.cmake ${PROJECT_BINARY_DIR}/rdmarpcConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/RdmarpcGenerate.cmake
  DESTINATION ${RDMARPC_INSTALL_CMAKEDIR})

# pkg-config: relocatable (paths relative to the .pc file), so `cmake --install --prefix` anywhere works.
set(RDMARPC_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH RDMARPC_PC_TO_PREFIX /prefix/${RDMARPC_PC_DIR} /prefix)  # "../.."
string(REGEX REPLACE "/$" "" RDMARPC_PC_TO_PREFIX "${RDMARPC_PC_TO_PREFIX}")
get_target_property(RDMARPC_ASIO_DEFINITIONS rdmarpc_asio INTERFACE_COMPILE_DEFINITIONS)
list(TRANSFORM RDMARPC_ASIO_DEFINITIONS PREPEND -D)
list(JOIN RDMARPC_ASIO_DEFINITIONS " " RDMARPC_PC_DEFINITIONS)
configure_file(${PROJECT_SOURCE_DIR}/cmake/rdmarpc.pc.in ${PROJECT_BINARY_DIR}/rdmarpc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rdmarpc.pc DESTINATION ${RDMARPC_PC_DIR})
