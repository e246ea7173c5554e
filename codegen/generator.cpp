// The protoc CodeGenerator of protoc-gen-rdmarpc (see generator.hpp).

#include "generator.hpp"

#include <google/protobuf/compiler/code_generator.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/zero_copy_stream.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "emit.hpp"
#include "model.hpp"

namespace rdmarpc::codegen {
namespace {

namespace pb = google::protobuf;

bool write_file(pb::compiler::GeneratorContext& context, const std::string& name, const std::string& text,
                std::string& error) {
  std::unique_ptr<pb::io::ZeroCopyOutputStream> stream(context.Open(name));
  std::size_t written = 0;
  while (written < text.size()) {
    void* data = nullptr;
    int size = 0;
    if (!stream->Next(&data, &size)) {
      error = "cannot write " + name;
      return false;
    }
    const std::size_t n = std::min(static_cast<std::size_t>(size), text.size() - written);
    std::memcpy(data, text.data() + written, n);
    written += n;
    if (n < static_cast<std::size_t>(size)) stream->BackUp(size - static_cast<int>(n));
  }
  return true;
}

}  // namespace

bool generator::Generate(const pb::FileDescriptor* file, const std::string& parameter,
                         pb::compiler::GeneratorContext* context, std::string* error) const {
  std::vector<std::pair<std::string, std::string>> options;
  pb::compiler::ParseGeneratorParameter(parameter, &options);
  if (!options.empty()) {
    const auto& [key, value] = options.front();
    *error = "unknown parameter '" + key + (value.empty() ? "" : "=" + value) +
             "' (protoc-gen-rdmarpc takes no parameters: use --rdmarpc_out=DIR)";
    return false;
  }
  file_model model;
  if (!build_file_model(*file, model, *error)) return false;
  return write_file(*context, model.header_name(), emit_header(model), *error) &&
         write_file(*context, model.source_name(), emit_source(model), *error);
}

}  // namespace rdmarpc::codegen
