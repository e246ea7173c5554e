#pragma once
// rdmarpc::services::reflection_service: gRPC's server reflection (grpc.reflection.v1
// ServerReflection/ServerReflectionInfo), so a client (the rdmarpc CLI, grpcurl-like tools) can
// list a server's services and fetch the descriptors of their methods and messages without the
// .proto files. Declare it before the server (a service must outlive the server it is added to),
// then add it with one line:
//   rdmarpc::services::reflection_service reflection;  ...  reflection.add_to(server);
// Layer: services (generated code over rpc). Threading: handlers run on the server's connection
// threads, several at once; the descriptor pool is thread-safe and the server's service list is
// fixed once serving. Like every service it must outlive the server it is added to.

#include <google/protobuf/descriptor.h>

#include <boost/asio/awaitable.hpp>

#include "grpc/reflection/v1/reflection.rdmarpc.pb.h"
#include "rpc/server.hpp"

namespace rdmarpc::services {

// Answers, one response per request in order:
//   list_services                  every service added to `server` (this one included), by full name
//   file_by_filename               that file ("kv.proto", as protoc named it)
//   file_containing_symbol         the file defining a service, method, message, enum, field, ...
//   file_containing_extension      the file defining extension N of a message
//   all_extension_numbers_of_type  the extension numbers of a message
// File answers carry serialized google.protobuf.FileDescriptorProtos: the file first, then every
// file it imports, transitively (each response stands alone, so a client can build a
// DescriptorPool from any one of them). Errors come as error_response with a canonical code:
// NOT_FOUND for an unknown file, symbol or extension (with a message saying which; for a service
// the server has but whose descriptor is not in the pool, i.e. compiled for protobuf's lite
// runtime or written by hand, the message says so), INVALID_ARGUMENT for a request with none of
// the above set.
class reflection_service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // Answers from `pool` (which must outlive this service); generated code's descriptors are in
  // the generated pool.
  explicit reflection_service(const google::protobuf::DescriptorPool& pool =
                                  *google::protobuf::DescriptorPool::generated_pool()) noexcept;

  // server.add_service(*this), and list_services lists `server`'s services (it reads them only while
  // the server serves). Call it where services are added (before serving). A reflection_service
  // added with plain server::add_service answers list_services with FAILED_PRECONDITION.
  void add_to(rdmarpc::server& server);

  // Answers `request` into `response` (what the stream does for each request; a test or another
  // transport can call it directly).
  void answer(const grpc::reflection::v1::ServerReflectionRequest& request,
              grpc::reflection::v1::ServerReflectionResponse& response) const;

  // grpc.reflection.v1.ServerReflection
  boost::asio::awaitable<void> server_reflection_info(
      rdmarpc::server_context& context,
      rdmarpc::server_reader_writer<grpc::reflection::v1::ServerReflectionRequest,
                                    grpc::reflection::v1::ServerReflectionResponse>& stream) override;

 private:
  void answer_symbol(const std::string& symbol,
                     grpc::reflection::v1::ServerReflectionResponse& response) const;
  bool is_served(std::string_view symbol) const;

  const rdmarpc::server* server_ = nullptr;
  const google::protobuf::DescriptorPool& pool_;
};

}  // namespace rdmarpc::services
