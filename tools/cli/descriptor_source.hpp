#pragma once
// Where the tool learns a server's services and message types: the server's reflection service
// (grpc.reflection.v1, the default) or .proto files compiled at run time (--proto FILE -I DIR).
// Both end in a google::protobuf::DescriptorPool; lookups of services, methods and symbols, with
// close names suggested for a mistyped one, work on either. Layer: tools/cli. Threading: one
// thread (the reflection source runs the session's io_context inside its lookups).

#include <google/protobuf/descriptor.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "options.hpp"

namespace rdmarpc::cli {

class session;

class descriptor_source {
 public:
  virtual ~descriptor_source() = default;
  // Full names of the services, sorted.
  virtual std::vector<std::string> services() = 0;
  // Types are found in it by name (a reflection source fetches files as they are asked for).
  virtual const google::protobuf::DescriptorPool& pool() = 0;
  // A lookup in pool() that failed because the source failed (the reflection stream broke) throws
  // here, with that failure; protobuf's lookup itself only says "not found".
  virtual void rethrow_failure() {}
};

// --proto files if any were given (throws cli_error(kExitBadInput) when they do not compile),
// else the server's reflection service through `s`.
std::unique_ptr<descriptor_source> make_descriptor_source(const options& o, session& s);
std::unique_ptr<descriptor_source> make_proto_file_source(const options& o);
std::unique_ptr<descriptor_source> make_reflection_source(session& s);

// "kv.Store/Get", "/kv.Store/Get" or "kv.Store.Get". Throws cli_error(kExitUnknownSymbol) naming
// what is missing and the closest names there are.
const google::protobuf::MethodDescriptor& find_method(descriptor_source& source, std::string_view name);
const google::protobuf::ServiceDescriptor& find_service(descriptor_source& source, std::string_view name);

// Names within a small edit distance of `wanted` (or equal ignoring case or package), closest
// first, at most three.
std::vector<std::string> close_names(std::string_view wanted, const std::vector<std::string>& names);

}  // namespace rdmarpc::cli
