// Builds the codegen model from protobuf descriptors (see model.hpp).

#include "model.hpp"

#include <google/protobuf/descriptor.h>

#include <map>
#include <set>

namespace rdmarpc::codegen {
namespace {

namespace pb = google::protobuf;

// The message's C++ class as protoc's C++ generator names it (the message may live in another
// file and package than the service).
std::string qualified_class_name(const pb::Descriptor& message) {
  return protobuf_qualified_class_name(message.file()->package(), message.full_name());
}

std::string relative_name(const pb::FileDescriptor& file, const std::string& full_name) {
  return file.package().empty() ? full_name : full_name.substr(file.package().size() + 1);
}

void collect_type_names(const pb::FileDescriptor& file, const pb::Descriptor& message,
                        std::set<std::string>& names) {
  names.insert(protobuf_class_name(relative_name(file, message.full_name())));
  for (int i = 0; i < message.nested_type_count(); ++i)
    collect_type_names(file, *message.nested_type(i), names);
  for (int i = 0; i < message.enum_type_count(); ++i) {
    names.insert(protobuf_class_name(relative_name(file, message.enum_type(i)->full_name())));
  }
}

// Every C++ class name protoc's C++ generator puts in this file's namespace.
std::set<std::string> protobuf_type_names(const pb::FileDescriptor& file) {
  std::set<std::string> names;
  for (int i = 0; i < file.message_type_count(); ++i) collect_type_names(file, *file.message_type(i), names);
  for (int i = 0; i < file.enum_type_count(); ++i) {
    names.insert(protobuf_class_name(relative_name(file, file.enum_type(i)->full_name())));
  }
  return names;
}

const char* streaming_kind(const pb::MethodDescriptor& method) {
  if (method.client_streaming() && method.server_streaming()) return "bidirectional streaming";
  if (method.client_streaming()) return "client streaming";
  return "server streaming";
}

bool build_service(const pb::ServiceDescriptor& service, const std::string& package, service_model& out,
                   std::string& error) {
  out.class_name = service_class_name(service.name());
  out.full_name = codegen::service_full_name(package, service.name());
  // Generated C++ name -> the rpc that took it, per scope: handlers live in Service, async_/do_
  // functions in Interface, descriptors in the service class (so get_method may be both the
  // handler of rpc GetMethod and the descriptor of rpc Get).
  std::map<std::string, std::string> handlers, client_functions, descriptors;
  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& method = *service.method(i);
    if (method.client_streaming() || method.server_streaming()) {
      error = "streaming RPCs are not supported yet (method " + method.full_name() + " is " +
              streaming_kind(method) + "; only unary methods can be generated)";
      return false;
    }
    method_model m;
    m.proto_name = method.name();
    m.full_name = method_full_name(package, service.name(), method.name());
    m.names = make_method_names(method.name());
    m.request_type = qualified_class_name(*method.input_type());
    m.response_type = qualified_class_name(*method.output_type());
    m.request_proto_name = method.input_type()->full_name();
    for (auto [used, name] :
         {std::pair{&handlers, &m.names.handler}, std::pair{&client_functions, &m.names.async_name},
          std::pair{&descriptors, &m.names.descriptor}}) {
      auto [it, inserted] = used->emplace(*name, method.name());
      if (!inserted) {
        error = "methods " + it->second + " and " + method.name() + " of service " + service.full_name() +
                " both map to the C++ name '" + *name + "'; rename one of them";
        return false;
      }
    }
    out.methods.push_back(std::move(m));
  }
  return true;
}

}  // namespace

bool build_file_model(const pb::FileDescriptor& file, file_model& out, std::string& error) {
  out.proto_name = file.name();
  out.base_name = strip_proto_suffix(file.name());
  out.cpp_namespace = cpp_namespace(file.package());
  const std::set<std::string> type_names = protobuf_type_names(file);
  std::map<std::string, std::string> classes;  // C++ class name -> service
  for (int i = 0; i < file.service_count(); ++i) {
    service_model s;
    if (!build_service(*file.service(i), file.package(), s, error)) return false;
    if (type_names.count(s.class_name) != 0) {
      error = "service " + file.service(i)->full_name() + " would generate the C++ class '" + s.class_name +
              "', which protoc's C++ generator already uses for a message or enum";
      return false;
    }
    auto [it, inserted] = classes.emplace(s.class_name, file.service(i)->name());
    if (!inserted) {
      error = "services " + it->second + " and " + file.service(i)->name() + " both map to the C++ class '" +
              s.class_name + "'";
      return false;
    }
    out.services.push_back(std::move(s));
  }
  return true;
}

}  // namespace rdmarpc::codegen
