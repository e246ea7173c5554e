#pragma once
// The plugin's view of one .proto file: its services and methods with every C++ name resolved.
// Layer: codegen. build_file_model validates (streaming, name collisions); the emitters only print.
// Threading: plain values.

#include <string>
#include <vector>

#include "names.hpp"

namespace google::protobuf {
class FileDescriptor;
}

namespace rdmarpc::codegen {

struct method_model {
  std::string proto_name;          // "Get"
  std::string full_name;           // "/kv.Store/Get": what method_id() hashes
  method_names names;              // handler, async_/do_ functions, descriptor
  std::string request_type;        // "::kv::GetRequest" (fully qualified C++ class)
  std::string response_type;       // "::kv::GetReply"
  std::string request_proto_name;  // "kv.GetRequest", for error messages
};

struct service_model {
  std::string class_name;  // "Store"
  std::string full_name;   // "kv.Store"
  std::vector<method_model> methods;
};

struct file_model {
  std::string proto_name;     // "dir/foo.proto", as protoc names it
  std::string base_name;      // "dir/foo": outputs are base_name + ".rdmarpc.pb.h" / ".cc"
  std::string cpp_namespace;  // "a::b::c", empty for the global namespace
  std::vector<service_model> services;

  std::string header_name() const { return base_name + ".rdmarpc.pb.h"; }
  std::string source_name() const { return base_name + ".rdmarpc.pb.cc"; }
  std::string protobuf_header_name() const { return base_name + ".pb.h"; }
};

// Fills `out` from `file`. On a file the plugin cannot handle (a streaming method, two methods
// mapping to one C++ name, ...) returns false with a message for protoc in `error`.
bool build_file_model(const google::protobuf::FileDescriptor& file, file_model& out, std::string& error);

}  // namespace rdmarpc::codegen
