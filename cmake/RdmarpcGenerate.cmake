# rdmarpc_generate(TARGET PROTOS a.proto ... [IMPORT_DIRS dir ...])
# Placeholder: the codegen work replaces this with the real function.
function(rdmarpc_generate target)
  message(FATAL_ERROR "rdmarpc_generate is not implemented yet")
endfunction()
