#pragma once
// The plugin's view of one .proto file: its services and methods with every C++ name resolved.
// Layer: codegen. build_file_model resolves every name (and name clashes); the emitters only print.
// Threading: plain values.

#include <string>
#include <vector>

#include "names.hpp"

namespace google::protobuf {
class FileDescriptor;
}

namespace rdmarpc::codegen {

// The .proto's `stream` keywords; mirrors rdmarpc::rpc_kind (codegen does not link the runtime).
enum class method_kind { unary, client_streaming, server_streaming, bidi_streaming };

// How a generated parser reads a field and stores it (rdmarpc/message_parser.hpp's wire_reader).
enum class parsed_kind {
  int32,
  int64,
  uint32,
  uint64,
  sint32,
  sint64,
  boolean,
  enumeration,  // varints
  fixed32,
  sfixed32,
  float32,
  fixed64,
  sfixed64,
  float64,  // fixed width
  string,
  bytes,  // length-delimited
};

struct parsed_field {
  int number = 0;
  std::string proto_name;  // "payload"
  std::string accessor;    // what protoc's accessors are named after: set_payload, mutable_payload
  parsed_kind kind = parsed_kind::int32;
  std::string enum_type;  // "::kv::Mode", for an enumeration
  std::string type_name;  // the .proto type, for the generated comment ("bytes", "kv.Mode")
  // A string protobuf checks for UTF-8 and refuses when it is not (proto3); a proto2 string is
  // taken as it is (protobuf's generated code only logs one, and only in a debug build).
  bool check_utf8 = false;
};

// A message type a service has a generated parser for (rdmarpc::message_parser): a request or reply
// of one of its unary methods whose fields are all singular scalars, open enums, strings or bytes
// (no message, repeated, map, oneof or required field, no extensions).
struct parser_model {
  std::string message_type;          // "::kv::GetRequest"
  std::string proto_name;            // "kv.GetRequest"
  std::string function;              // "parse_0": its static member function of the service's message_parsers
  std::vector<parsed_field> fields;  // in field number order
  bool deprecated_fields = false;    // some field has `deprecated = true` (its accessors warn)
};

struct method_model {
  std::string proto_name;  // "Get"
  method_kind kind = method_kind::unary;
  bool deprecated = false;    // option deprecated = true: client functions and handlers get [[deprecated]]
  std::string full_name;      // "/kv.Store/Get": what method_id() hashes
  method_names names;         // handler, async_/do_ functions, descriptor
  std::string request_type;   // "::kv::GetRequest" (fully qualified C++ class)
  std::string response_type;  // "::kv::GetReply"
  std::string request_proto_name;  // "kv.GetRequest", for error messages
  // The types can lack a proto2 required field (rdmarpc::method_descriptor's flags of that name).
  bool request_may_lack_required = true;
  bool reply_may_lack_required = true;
  // The generated parsers' functions (parser_model::function) of a unary method's request and
  // reply types, or empty (protobuf parses them).
  std::string request_parser;
  std::string reply_parser;

  bool streaming() const noexcept { return kind != method_kind::unary; }
  // The Interface's public function: async_get (unary) or watch (streaming).
  const std::string& client_function() const noexcept {
    return streaming() ? names.stream_name : names.async_name;
  }
};

struct service_model {
  std::string class_name;  // "Store"
  std::string full_name;   // "kv.Store"
  std::vector<method_model> methods;
  std::vector<parser_model> parsers;  // one per message type, in the order the methods name them

  bool has_unary() const noexcept;
  bool has_streaming() const noexcept;
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

// Fills `out` from `file`. Every file protoc accepts gets a model: C++ names that would clash (two
// methods mapping to one name, a service named like a message) are made unique with first_free_name
// in declaration order. `error` is for what the plugin still cannot handle (nothing today).
bool build_file_model(const google::protobuf::FileDescriptor& file, file_model& out, std::string& error);

}  // namespace rdmarpc::codegen
