# rdmarpc_generate(TARGET <target> PROTOS <a.proto>... [IMPORT_DIRS <dir>...])
#
# Runs protoc with its C++ generator and protoc-gen-rdmarpc on each .proto file, adds the generated
# foo.pb.cc and foo.rdmarpc.pb.cc to <target>, puts the output directory on <target>'s include path
# (PUBLIC, so a library of generated code can be linked by others) and links rdmarpc::rdmarpc.
#
# * Call it in the directory that created <target> (CMake attaches custom commands per directory).
# * A proto file is named relative to the first IMPORT_DIRS entry that contains it; without
#   IMPORT_DIRS, relative to its own directory. "protos/kv/kv.proto" with IMPORT_DIRS protos
#   gives #include "kv/kv.rdmarpc.pb.h"; without IMPORT_DIRS, #include "kv.rdmarpc.pb.h".
# * Imported .proto files must be listed in PROTOS too (of this or a linked target) so their
#   generated code is compiled; google/protobuf/*.proto come with libprotobuf.
# * Output goes to ${CMAKE_CURRENT_BINARY_DIR}/<target>.rdmarpc/. Editing a .proto, anything it
#   imports (protoc writes a depfile) or the plugin regenerates.
#
# Works inside the rdmarpc build, for a project that add_subdirectory()'s rdmarpc, and after
# find_package(rdmarpc CONFIG) of an installed rdmarpc (whose config includes this file): the
# plugin is the target rdmarpc::protoc-gen-rdmarpc, in the first two cases an alias of the
# plugin built here, in the last the installed executable. protoc is found once here and cached.

include_guard(GLOBAL)

if(NOT Protobuf_PROTOC_EXECUTABLE)
  find_program(Protobuf_PROTOC_EXECUTABLE protoc REQUIRED)
endif()

# A function runs with the policies in force where it was defined. CMP0116 NEW makes CMake rewrite
# protoc's depfile to the paths Ninja knows the outputs by, whatever the caller's
# cmake_minimum_required (with it OLD, every build would rerun protoc and recompile).
cmake_policy(PUSH)
if(POLICY CMP0116)
  cmake_policy(SET CMP0116 NEW)
endif()
function(rdmarpc_generate)
  cmake_parse_arguments(ARG "" "TARGET" "PROTOS;IMPORT_DIRS" ${ARGN})
  if(NOT ARG_TARGET)
    message(FATAL_ERROR "rdmarpc_generate: TARGET is required")
  endif()
  if(NOT TARGET ${ARG_TARGET})
    message(FATAL_ERROR "rdmarpc_generate: '${ARG_TARGET}' is not a target (create it first)")
  endif()
  if(NOT ARG_PROTOS)
    message(FATAL_ERROR "rdmarpc_generate: PROTOS is empty")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "rdmarpc_generate: unexpected arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET rdmarpc::protoc-gen-rdmarpc)
    message(FATAL_ERROR "rdmarpc_generate: the rdmarpc::protoc-gen-rdmarpc target does not exist "
                        "(find_package(rdmarpc CONFIG REQUIRED) or add_subdirectory(rdmarpc) first)")
  endif()
  # Regenerate when the plugin changes: the target when it is built here, the file when installed.
  get_target_property(plugin_imported rdmarpc::protoc-gen-rdmarpc IMPORTED)
  if(plugin_imported)
    set(plugin_depends "$<TARGET_FILE:rdmarpc::protoc-gen-rdmarpc>")
  else()
    set(plugin_depends protoc-gen-rdmarpc)
  endif()

  set(import_dirs "")
  foreach(dir IN LISTS ARG_IMPORT_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND import_dirs "${dir}")
  endforeach()

  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/${ARG_TARGET}.rdmarpc")
  set(generated_sources "")
  foreach(proto IN LISTS ARG_PROTOS)
    get_filename_component(proto "${proto}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    # The import dir that names this file; its own directory when none does.
    set(root "")
    foreach(dir IN LISTS import_dirs)
      cmake_path(IS_PREFIX dir "${proto}" NORMALIZE is_under)
      if(is_under)
        set(root "${dir}")
        break()
      endif()
    endforeach()
    set(include_flags "")
    if(NOT root)
      get_filename_component(root "${proto}" DIRECTORY)
      list(APPEND include_flags "-I${root}")
    endif()
    foreach(dir IN LISTS import_dirs)
      list(APPEND include_flags "-I${dir}")
    endforeach()
    file(RELATIVE_PATH rel "${root}" "${proto}")
    string(REGEX REPLACE "\\.proto$" "" base "${rel}")
    # In the order protoc's --dependency_out names them (sorted): Ninja checks that a depfile's
    # first target is the command's first output, and reruns the command on every build if not.
    set(outputs
      "${out_dir}/${base}.pb.cc" "${out_dir}/${base}.pb.h"
      "${out_dir}/${base}.rdmarpc.pb.cc" "${out_dir}/${base}.rdmarpc.pb.h")
    string(MAKE_C_IDENTIFIER "${base}" depname)
    set(depfile "${out_dir}/${depname}.d")
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND ${CMAKE_COMMAND} -E make_directory "${out_dir}"
      COMMAND "${Protobuf_PROTOC_EXECUTABLE}"
              "--plugin=protoc-gen-rdmarpc=$<TARGET_FILE:rdmarpc::protoc-gen-rdmarpc>"
              "--cpp_out=${out_dir}" "--rdmarpc_out=${out_dir}"
              "--dependency_out=${depfile}"
              ${include_flags} "${proto}"
      DEPENDS "${proto}" ${plugin_depends} "${Protobuf_PROTOC_EXECUTABLE}"
      DEPFILE "${depfile}"
      COMMENT "rdmarpc: generating C++ from ${rel}"
      VERBATIM)
    list(APPEND generated_sources ${outputs})
  endforeach()

  target_sources(${ARG_TARGET} PRIVATE ${generated_sources})
  target_include_directories(${ARG_TARGET} PUBLIC "$<BUILD_INTERFACE:${out_dir}>")
  target_link_libraries(${ARG_TARGET} PUBLIC rdmarpc::rdmarpc)
endfunction()
cmake_policy(POP)
