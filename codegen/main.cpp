// protoc-gen-rdmarpc: protoc runs it for --rdmarpc_out=DIR (found on PATH, or given with
// --plugin=protoc-gen-rdmarpc=PATH). Layer: codegen. Single-threaded.

#include <google/protobuf/compiler/plugin.h>

#include "generator.hpp"

int main(int argc, char* argv[]) {
  const rdmarpc::codegen::generator generator;
  return google::protobuf::compiler::PluginMain(argc, argv, &generator);
}
