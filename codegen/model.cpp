// Builds the codegen model from protobuf descriptors (see model.hpp).

#include "model.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <algorithm>
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

// Whether `message` can be uninitialized (IsInitialized() false): a required field of its own, a
// message field (map values included) whose type can, or extension ranges (a message extension can
// carry required fields). `seen` breaks recursion cycles: a type met again adds nothing new.
bool may_lack_required(const pb::Descriptor& message, std::set<const pb::Descriptor*>& seen) {
  if (!seen.insert(&message).second) return false;
  if (message.extension_range_count() > 0) return true;
  for (int i = 0; i < message.field_count(); ++i) {
    const pb::FieldDescriptor& field = *message.field(i);
    if (field.is_required()) return true;
    if (field.cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
        may_lack_required(*field.message_type(), seen)) {
      return true;
    }
  }
  return false;
}

bool may_lack_required(const pb::Descriptor& message) {
  std::set<const pb::Descriptor*> seen;
  return may_lack_required(message, seen);
}

void collect_enum_names(const pb::FileDescriptor& file, const pb::EnumDescriptor& e,
                        std::set<std::string>& names) {
  const std::string type = protobuf_class_name(relative_name(file, e.full_name()));
  names.insert(type);
  for (const char* helper : {"_IsValid", "_descriptor", "_Name", "_Parse", "_MIN", "_MAX", "_ARRAYSIZE"}) {
    names.insert(type + helper);
  }
  // A top-level enum's values live in the namespace as they are; a nested one's as Outer_VALUE.
  const std::string prefix =
      e.containing_type() == nullptr
          ? std::string()
          : protobuf_class_name(relative_name(file, e.containing_type()->full_name())) + "_";
  for (int i = 0; i < e.value_count(); ++i) names.insert(prefix + e.value(i)->name());
  if (!prefix.empty()) {
    for (const char* limit : {"_MIN", "_MAX", "_ARRAYSIZE"}) names.insert(prefix + e.name() + limit);
  }
}

void collect_type_names(const pb::FileDescriptor& file, const pb::Descriptor& message,
                        std::set<std::string>& names) {
  const std::string type = protobuf_class_name(relative_name(file, message.full_name()));
  names.insert(type);
  names.insert(type + "DefaultTypeInternal");
  names.insert(type + "_DoNotUse");  // a map field's entry class
  for (int i = 0; i < message.nested_type_count(); ++i)
    collect_type_names(file, *message.nested_type(i), names);
  for (int i = 0; i < message.enum_type_count(); ++i) collect_enum_names(file, *message.enum_type(i), names);
}

// Every name protoc's C++ generator declares in this file's namespace that a service class could
// clash with: classes, enum values and helpers, top-level extensions (custom options). In the
// global namespace also the namespaces the generated code names (::std, ::boost, ...).
std::set<std::string> namespace_names(const pb::FileDescriptor& file) {
  std::set<std::string> names;
  for (int i = 0; i < file.message_type_count(); ++i) collect_type_names(file, *file.message_type(i), names);
  for (int i = 0; i < file.enum_type_count(); ++i) collect_enum_names(file, *file.enum_type(i), names);
  for (int i = 0; i < file.extension_count(); ++i) names.insert(file.extension(i)->name());
  if (file.package().empty()) {
    names.insert({"std", "boost", "rdmarpc", "google"});
    for (int i = 0; i < file.dependency_count(); ++i) {
      const std::string& package = file.dependency(i)->package();
      if (!package.empty()) names.insert(package.substr(0, package.find('.')));
    }
  }
  return names;
}

// How a generated parser reads `field`; false when it cannot (protobuf then parses the message).
bool parsed_kind_of(const pb::FieldDescriptor& field, parsed_kind& kind) {
  using F = pb::FieldDescriptor;
  switch (field.type()) {
    case F::TYPE_INT32: kind = parsed_kind::int32; return true;
    case F::TYPE_INT64: kind = parsed_kind::int64; return true;
    case F::TYPE_UINT32: kind = parsed_kind::uint32; return true;
    case F::TYPE_UINT64: kind = parsed_kind::uint64; return true;
    case F::TYPE_SINT32: kind = parsed_kind::sint32; return true;
    case F::TYPE_SINT64: kind = parsed_kind::sint64; return true;
    case F::TYPE_BOOL: kind = parsed_kind::boolean; return true;
    case F::TYPE_FIXED32: kind = parsed_kind::fixed32; return true;
    case F::TYPE_SFIXED32: kind = parsed_kind::sfixed32; return true;
    case F::TYPE_FLOAT: kind = parsed_kind::float32; return true;
    case F::TYPE_FIXED64: kind = parsed_kind::fixed64; return true;
    case F::TYPE_SFIXED64: kind = parsed_kind::sfixed64; return true;
    case F::TYPE_DOUBLE: kind = parsed_kind::float64; return true;
    case F::TYPE_ENUM:
      // Only an open (proto3) enum takes any value; a closed one keeps unknown values as unknown
      // fields, which protobuf's parser does.
      kind = parsed_kind::enumeration;
      return field.file()->syntax() == pb::FileDescriptor::SYNTAX_PROTO3 &&
             field.enum_type()->file()->syntax() == pb::FileDescriptor::SYNTAX_PROTO3;
    case F::TYPE_STRING:
    case F::TYPE_BYTES:
      kind = field.type() == F::TYPE_STRING ? parsed_kind::string : parsed_kind::bytes;
      return field.options().ctype() == pb::FieldOptions::STRING;  // (not a Cord or StringPiece)
    case F::TYPE_MESSAGE:
    case F::TYPE_GROUP: return false;
  }
  return false;
}

// The fields of `message` for a generated parser, or false when it cannot parse that type.
bool parsed_fields_of(const pb::Descriptor& message, parser_model& out) {
  if (message.extension_range_count() > 0 || message.options().message_set_wire_format() ||
      message.options().map_entry()) {
    return false;
  }
  for (int i = 0; i < message.field_count(); ++i) {
    const pb::FieldDescriptor& field = *message.field(i);
    if (field.is_repeated() || field.is_required() || field.real_containing_oneof() != nullptr ||
        field.options().weak() || field.options().lazy()) {
      return false;
    }
    parsed_field f;
    if (!parsed_kind_of(field, f.kind)) return false;
    f.number = field.number();
    f.proto_name = field.name();
    f.accessor = protobuf_field_name(field.name());
    f.check_utf8 =
        f.kind == parsed_kind::string && field.file()->syntax() == pb::FileDescriptor::SYNTAX_PROTO3;
    f.type_name =
        field.type() == pb::FieldDescriptor::TYPE_ENUM ? field.enum_type()->full_name() : field.type_name();
    if (f.kind == parsed_kind::enumeration) {
      f.enum_type =
          protobuf_qualified_class_name(field.enum_type()->file()->package(), field.enum_type()->full_name());
    }
    out.deprecated_fields = out.deprecated_fields || field.options().deprecated();
    out.fields.push_back(std::move(f));
  }
  std::sort(out.fields.begin(), out.fields.end(),
            [](const parsed_field& a, const parsed_field& b) { return a.number < b.number; });
  return true;
}

// The parser function for `message` in `s`, made on first use; empty when it gets none.
std::string parser_for(const pb::Descriptor& message, service_model& s) {
  const std::string type = qualified_class_name(message);
  for (const parser_model& p : s.parsers) {
    if (p.message_type == type) return p.function;
  }
  parser_model p;
  if (!parsed_fields_of(message, p)) return {};
  p.message_type = type;
  p.proto_name = message.full_name();
  p.function = "parse_" + std::to_string(s.parsers.size());
  s.parsers.push_back(std::move(p));
  return s.parsers.back().function;
}

method_kind kind_of(const pb::MethodDescriptor& method) {
  if (method.client_streaming() && method.server_streaming()) return method_kind::bidi_streaming;
  if (method.client_streaming()) return method_kind::client_streaming;
  if (method.server_streaming()) return method_kind::server_streaming;
  return method_kind::unary;
}

// The C++ names taken in each scope of one generated service class, so a later method's names can
// avoid them.
struct service_scopes {
  std::set<std::string> handlers;          // Service and CallbackService
  std::set<std::string> client_functions;  // Interface (and the Stub deriving from it)
  std::set<std::string> descriptors;       // the service class itself

  bool clash(const method_names& names, bool streaming) const {
    return handlers.count(names.handler) != 0 ||
           client_functions.count(streaming ? names.stream_name : names.async_name) != 0 ||
           client_functions.count(names.do_name) != 0 || descriptors.count(names.descriptor) != 0;
  }
  void take(const method_model& m) {
    handlers.insert(m.names.handler);
    client_functions.insert(m.client_function());
    client_functions.insert(m.names.do_name);
    descriptors.insert(m.names.descriptor);
  }
};

void build_service(const pb::ServiceDescriptor& service, const std::string& package,
                   const std::string& class_name, service_model& out) {
  out.class_name = class_name;
  out.full_name = codegen::service_full_name(package, service.name());
  service_scopes scopes;
  scopes.client_functions = {"channel", "channel_"};  // the Stub's own members
  // A class cannot have a member of its own name (a service `get_method` with an rpc Get).
  scopes.descriptors = {class_name, "service_full_name", "method_descriptors", "message_parsers"};
  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& method = *service.method(i);
    method_model m;
    m.proto_name = method.name();
    m.kind = kind_of(method);
    m.deprecated = method.options().deprecated();
    m.full_name = method_full_name(package, service.name(), method.name());
    std::string snake = to_snake_case(method.name());
    if (snake.empty()) snake = "rpc";  // rpc _ (all underscores)
    const std::string base = first_free_name(snake, [&](const std::string& candidate) {
      return scopes.clash(make_method_names(candidate), m.streaming());
    });
    m.names = make_method_names(base);
    m.request_type = qualified_class_name(*method.input_type());
    m.response_type = qualified_class_name(*method.output_type());
    m.request_proto_name = method.input_type()->full_name();
    m.request_may_lack_required = may_lack_required(*method.input_type());
    m.reply_may_lack_required = may_lack_required(*method.output_type());
    if (!m.streaming()) {
      m.request_parser = parser_for(*method.input_type(), out);
      m.reply_parser = parser_for(*method.output_type(), out);
    }
    scopes.take(m);
    out.methods.push_back(std::move(m));
  }
}

}  // namespace

bool service_model::has_unary() const noexcept {
  for (const method_model& m : methods) {
    if (!m.streaming()) return true;
  }
  return false;
}

bool service_model::has_streaming() const noexcept {
  for (const method_model& m : methods) {
    if (m.streaming()) return true;
  }
  return false;
}

bool build_file_model(const pb::FileDescriptor& file, file_model& out, std::string& /*error*/) {
  out.proto_name = file.name();
  out.base_name = strip_proto_suffix(file.name());
  out.cpp_namespace = cpp_namespace(file.package());
  // Names in the file's namespace: protoc's, then each service class as it is made.
  std::set<std::string> taken = namespace_names(file);
  for (int i = 0; i < file.service_count(); ++i) {
    const pb::ServiceDescriptor& service = *file.service(i);
    const std::string class_name =
        first_free_name(service_class_name(service.name()), [&](const std::string& name) {
          return taken.count(name) != 0 || name == "service_full_name" || name == "method_descriptors" ||
                 name == "message_parsers";
        });
    taken.insert(class_name);
    service_model s;
    build_service(service, file.package(), class_name, s);
    out.services.push_back(std::move(s));
  }
  return true;
}

}  // namespace rdmarpc::codegen
