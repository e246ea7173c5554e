# Runs protoc with protoc-gen-rdmarpc on PROTO and passes only when protoc FAILS and its output
# matches EXPECT (a regex). Usage: cmake -DPROTOC=... -DPLUGIN=... -DIMPORT_DIR=... -DPROTO=...
#   -DOUT_DIR=... -DEXPECT=... [-DPARAMETER=...] -P expect_protoc_failure.cmake
file(MAKE_DIRECTORY "${OUT_DIR}")
set(out_flag "--rdmarpc_out=${OUT_DIR}")
if(DEFINED PARAMETER)
  set(out_flag "--rdmarpc_out=${PARAMETER}:${OUT_DIR}")
endif()
execute_process(
  COMMAND "${PROTOC}" "--plugin=protoc-gen-rdmarpc=${PLUGIN}" "-I${IMPORT_DIR}" "${out_flag}" "${PROTO}"
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
message("protoc exit status: ${result}\n${output}")
if(result EQUAL 0)
  message(FATAL_ERROR "protoc succeeded, but it should have rejected ${PROTO}")
endif()
if(NOT output MATCHES "${EXPECT}")
  message(FATAL_ERROR "protoc failed, but its message does not match '${EXPECT}'")
endif()
