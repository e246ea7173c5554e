#include "services/reflection_service.hpp"

#include <google/protobuf/descriptor.pb.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "rpc/status.hpp"

namespace rdmarpc::services {

namespace reflection = grpc::reflection::v1;
namespace pb = google::protobuf;

namespace {

void set_error(reflection::ServerReflectionResponse& response, status_code code, std::string message) {
  auto* error = response.mutable_error_response();
  error->set_error_code(static_cast<int>(code));
  error->set_error_message(std::move(message));
}

// `file` first, then what it imports, depth first, each file once.
void add_file_and_dependencies(const pb::FileDescriptor* file,
                               std::unordered_set<const pb::FileDescriptor*>& seen,
                               reflection::FileDescriptorResponse& out) {
  if (!seen.insert(file).second) return;
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  proto.SerializeToString(out.add_file_descriptor_proto());
  for (int i = 0; i < file->dependency_count(); ++i)
    add_file_and_dependencies(file->dependency(i), seen, out);
}

void set_file(reflection::ServerReflectionResponse& response, const pb::FileDescriptor* file) {
  std::unordered_set<const pb::FileDescriptor*> seen;
  add_file_and_dependencies(file, seen, *response.mutable_file_descriptor_response());
}

}  // namespace

reflection_service::reflection_service(const pb::DescriptorPool& pool) noexcept : pool_(pool) {}

void reflection_service::add_to(rdmarpc::server& server) {
  server.add_service(*this);
  server_ = &server;
}

void reflection_service::answer(const reflection::ServerReflectionRequest& request,
                                reflection::ServerReflectionResponse& response) const {
  response.Clear();
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case reflection::ServerReflectionRequest::kListServices: {
      if (server_ == nullptr) {
        set_error(response, status_code::failed_precondition,
                  "this reflection service was added with server::add_service and does not know the "
                  "server's services: add it with reflection_service::add_to(server)");
        return;
      }
      auto* list = response.mutable_list_services_response();
      for (std::string& name : server_->service_names()) list->add_service()->set_name(std::move(name));
      return;
    }
    case reflection::ServerReflectionRequest::kFileByFilename: {
      const std::string& name = request.file_by_filename();
      if (const auto* file = pool_.FindFileByName(name)) {
        set_file(response, file);
      } else {
        set_error(response, status_code::not_found, "file not found: '" + name + "'");
      }
      return;
    }
    case reflection::ServerReflectionRequest::kFileContainingSymbol:
      answer_symbol(request.file_containing_symbol(), response);
      return;
    case reflection::ServerReflectionRequest::kFileContainingExtension: {
      const auto& ext = request.file_containing_extension();
      const auto* type = pool_.FindMessageTypeByName(ext.containing_type());
      if (type == nullptr) {
        set_error(response, status_code::not_found, "type not found: '" + ext.containing_type() + "'");
        return;
      }
      const auto* field = pool_.FindExtensionByNumber(type, ext.extension_number());
      if (field == nullptr) {
        set_error(response, status_code::not_found,
                  "extension " + std::to_string(ext.extension_number()) + " of '" + ext.containing_type() +
                      "' not found");
        return;
      }
      set_file(response, field->file());
      return;
    }
    case reflection::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const std::string& name = request.all_extension_numbers_of_type();
      const auto* type = pool_.FindMessageTypeByName(name);
      if (type == nullptr) {
        set_error(response, status_code::not_found, "type not found: '" + name + "'");
        return;
      }
      std::vector<const pb::FieldDescriptor*> extensions;
      pool_.FindAllExtensions(type, &extensions);
      auto* out = response.mutable_all_extension_numbers_response();
      out->set_base_type_name(type->full_name());
      for (const auto* field : extensions) out->add_extension_number(field->number());
      return;
    }
    case reflection::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET: break;
  }
  set_error(response, status_code::invalid_argument,
            "the request sets none of list_services, file_by_filename, file_containing_symbol, "
            "file_containing_extension, all_extension_numbers_of_type");
}

void reflection_service::answer_symbol(const std::string& symbol,
                                       reflection::ServerReflectionResponse& response) const {
  if (const auto* file = pool_.FindFileContainingSymbol(symbol)) {
    set_file(response, file);
    return;
  }
  if (is_served(symbol)) {
    set_error(response, status_code::not_found,
              "no descriptor for '" + symbol +
                  "': the server has this service, but its code carries no descriptors (compiled for "
                  "protobuf's lite runtime, or written by hand); use its .proto file");
    return;
  }
  set_error(response, status_code::not_found, "symbol not found: '" + symbol + "'");
}

// `symbol` is a service the server has, or one of its methods ("pkg.Service.Method").
bool reflection_service::is_served(std::string_view symbol) const {
  if (server_ == nullptr) return false;
  for (const std::string& name : server_->service_names()) {
    if (symbol == name) return true;
    if (symbol.size() > name.size() + 1 && symbol.starts_with(name) && symbol[name.size()] == '.' &&
        symbol.find('.', name.size() + 1) == std::string_view::npos)
      return true;
  }
  return false;
}

boost::asio::awaitable<void> reflection_service::server_reflection_info(
    rdmarpc::server_context& /*context*/,
    rdmarpc::server_reader_writer<reflection::ServerReflectionRequest, reflection::ServerReflectionResponse>&
        stream) {
  reflection::ServerReflectionRequest request;
  reflection::ServerReflectionResponse response;
  for (;;) {
    auto [read_ec] = co_await stream.async_read(request, boost::asio::as_tuple(boost::asio::use_awaitable));
    // The client's writes_done ends the call with OK; a broken stream has nobody to answer.
    if (read_ec) co_return;
    answer(request, response);
    auto [write_ec] =
        co_await stream.async_write(response, boost::asio::as_tuple(boost::asio::use_awaitable));
    if (write_ec) co_return;
  }
}

}  // namespace rdmarpc::services
