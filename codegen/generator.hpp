#pragma once
// rdmarpc::codegen::generator: the protoc CodeGenerator behind protoc-gen-rdmarpc. For every .proto
// file it writes foo.rdmarpc.pb.h and foo.rdmarpc.pb.cc (stamped files even when the file has no
// services, so build systems can always list both outputs). Layer: codegen. Threading: stateless.

#include <google/protobuf/compiler/code_generator.h>

#include <cstdint>
#include <string>

namespace rdmarpc::codegen {

class generator final : public google::protobuf::compiler::CodeGenerator {
 public:
  // Rejects any parameter (--rdmarpc_out=PARAM:dir): the plugin has no options yet, and silently
  // ignoring a typo would hide it.
  bool Generate(const google::protobuf::FileDescriptor* file, const std::string& parameter,
                google::protobuf::compiler::GeneratorContext* context, std::string* error) const override;

  // proto3 `optional` needs nothing from us (the fields live in protoc's own classes), but protoc
  // refuses to run a plugin that does not declare it.
  std::uint64_t GetSupportedFeatures() const override { return FEATURE_PROTO3_OPTIONAL; }
};

}  // namespace rdmarpc::codegen
