// Prints foo.rdmarpc.pb.cc: the Stub's calls into channel::start_unary_call (streams:
// channel::start_stream) and the new_call / new_stream_call of Service and CallbackService (a typed
// call object per method; the server parses, runs and replies through it).

#include <cstdint>

#include "emit.hpp"
#include "template.hpp"

namespace rdmarpc::codegen {
namespace {

// "::kv::Store": names in the .cc are fully qualified (declarators too, with trailing return types
// so "T ::kv::..." never parses as "T::kv"), so a handler or parameter can never hide the class
// (a service `store` with an rpc `Store` has a handler named store).
std::string qualified_class(const file_model& file, const service_model& s) {
  return file.cpp_namespace.empty() ? "::" + s.class_name : "::" + file.cpp_namespace + "::" + s.class_name;
}

void print_stub(code_writer& p, const file_model& file, const service_model& s) {
  for (const method_model& m : s.methods) {
    const vars v = {{"qclass", qualified_class(file, s)},
                    {"do", m.names.do_name},
                    {"descriptor", m.names.descriptor},
                    {"request", m.request_type},
                    {"response", m.response_type}};
    switch (m.kind) {
      case method_kind::unary:
        p.print(v,
                "void $qclass$::Stub::$do$(::rdmarpc::client_context* context, const $request$& request,\n"
                "    ::rdmarpc::unary_completion<$response$> done) {\n"
                "  channel_->start_unary_call($qclass$::$descriptor$, context, request, "
                "::std::move(done).release());\n"
                "}\n"
                "\n");
        break;
      case method_kind::server_streaming:
        p.print(v,
                "auto $qclass$::Stub::$do$(::rdmarpc::client_context* context, const $request$& request)\n"
                "    -> ::std::shared_ptr<::rdmarpc::stream_io> {\n"
                "  return channel_->start_stream($qclass$::$descriptor$, context, &request);\n"
                "}\n"
                "\n");
        break;
      case method_kind::client_streaming:
      case method_kind::bidi_streaming:
        p.print(v,
                "auto $qclass$::Stub::$do$(::rdmarpc::client_context* context)\n"
                "    -> ::std::shared_ptr<::rdmarpc::stream_io> {\n"
                "  return channel_->start_stream($qclass$::$descriptor$, context, nullptr);\n"
                "}\n"
                "\n");
        break;
    }
  }
}

// The wire_reader call that reads a field of `kind` into a local `v` (a string or bytes field: into
// the message's own string), and how `v` is stored.
struct field_code {
  const char* local;  // the type of `v`, or null for strings and bytes
  const char* read;   // "varint", "fixed" or "bytes"
  std::string value;  // what set_NAME() takes
};

field_code code_for(const parsed_field& f) {
  switch (f.kind) {
    case parsed_kind::int32: return {"::std::uint64_t", "varint", "static_cast<::std::int32_t>(v)"};
    case parsed_kind::int64: return {"::std::uint64_t", "varint", "static_cast<::std::int64_t>(v)"};
    case parsed_kind::uint32: return {"::std::uint64_t", "varint", "static_cast<::std::uint32_t>(v)"};
    case parsed_kind::uint64: return {"::std::uint64_t", "varint", "v"};
    case parsed_kind::sint32: return {"::std::uint64_t", "varint", "::rdmarpc::protobuf_wire::zigzag32(v)"};
    case parsed_kind::sint64: return {"::std::uint64_t", "varint", "::rdmarpc::protobuf_wire::zigzag64(v)"};
    case parsed_kind::boolean: return {"::std::uint64_t", "varint", "v != 0"};
    case parsed_kind::enumeration:
      return {"::std::uint64_t", "varint",
              "static_cast<" + f.enum_type + ">(static_cast<::std::int32_t>(v))"};
    case parsed_kind::fixed32: return {"::std::uint32_t", "fixed", "v"};
    case parsed_kind::sfixed32: return {"::std::int32_t", "fixed", "v"};
    case parsed_kind::float32: return {"float", "fixed", "v"};
    case parsed_kind::fixed64: return {"::std::uint64_t", "fixed", "v"};
    case parsed_kind::sfixed64: return {"::std::int64_t", "fixed", "v"};
    case parsed_kind::float64: return {"double", "fixed", "v"};
    case parsed_kind::string:
    case parsed_kind::bytes: return {nullptr, "bytes", ""};
  }
  return {nullptr, "bytes", ""};
}

// protobuf's wire type of a field of `kind`.
int wire_type_of(parsed_kind kind) {
  switch (kind) {
    case parsed_kind::fixed64:
    case parsed_kind::sfixed64:
    case parsed_kind::float64: return 1;
    case parsed_kind::string:
    case parsed_kind::bytes: return 2;
    case parsed_kind::fixed32:
    case parsed_kind::sfixed32:
    case parsed_kind::float32: return 5;
    default: return 0;
  }
}

// A service's message_parsers: each reads the fields it knows in place and hands anything else
// (an unknown field or wire type, a malformed field, a string that is not UTF-8) to protobuf.
void print_parsers(code_writer& p, const file_model& file, const service_model& s) {
  for (const parser_model& m : s.parsers) {
    // Reading a deprecated field is the parser's job: silence just that.
    if (m.deprecated_fields) {
      p.print(
          "#pragma GCC diagnostic push\n"
          "#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"\n");
    }
    p.print({{"qclass", qualified_class(file, s)},
             {"function", m.function},
             {"type", m.message_type},
             {"proto_name", m.proto_name}},
            "// $proto_name$\n"
            "bool $qclass$::message_parsers::$function$(::google::protobuf::MessageLite& into,\n"
            "    ::std::span<const ::std::byte> bytes) {\n"
            "  // Another type (a DynamicMessage or a stand-in a caller parses into) or a huge message:\n"
            "  // protobuf's parse.\n"
            "  if (typeid(into) != typeid($type$) || bytes.size() > "
            "::rdmarpc::protobuf_wire::kMaxParsedBytes) {\n"
            "    return ::rdmarpc::protobuf_wire::protobuf_parse(into, bytes);\n"
            "  }\n"
            "  auto& message = static_cast<$type$&>(into);\n"
            "  message.Clear();\n"
            "  ::rdmarpc::protobuf_wire::wire_reader r(bytes);\n"
            "  while (!r.at_end()) {\n"
            "    switch (r.tag()) {\n");
    for (const parsed_field& f : m.fields) {
      const field_code c = code_for(f);
      const vars v = {
          {"tag", std::to_string((static_cast<std::uint64_t>(f.number) << 3) | wire_type_of(f.kind))},
          {"type_name", f.type_name},
          {"proto_name", f.proto_name},
          {"number", std::to_string(f.number)},
          {"accessor", f.accessor},
          {"local", c.local == nullptr ? "" : c.local},
          {"read", c.read},
          {"value", c.value}};
      p.print(v, "      case $tag$: {  // $type_name$ $proto_name$ = $number$\n");
      if (f.kind == parsed_kind::string && f.check_utf8) {
        p.print(v,
                "        if (!r.bytes(*message.mutable_$accessor$()) || "
                "!::rdmarpc::protobuf_wire::valid_utf8(message.$accessor$())) break;\n");
      } else if (f.kind == parsed_kind::string || f.kind == parsed_kind::bytes) {
        p.print(v, "        if (!r.bytes(*message.mutable_$accessor$())) break;\n");
      } else {
        p.print(v,
                "        $local$ v{};\n"
                "        if (!r.$read$(v)) break;\n"
                "        message.set_$accessor$($value$);\n");
      }
      p.print(
          "        continue;\n"
          "      }\n");
    }
    p.print(
        "      default:\n"
        "        break;\n"
        "    }\n"
        "    // An unknown field or wire type, a malformed field, or a proto3 string that is not UTF-8.\n"
        "    return ::rdmarpc::protobuf_wire::protobuf_parse(into, bytes);\n"
        "  }\n"
        "  return true;\n"
        "}\n");
    if (m.deprecated_fields) p.print("#pragma GCC diagnostic pop\n");
    p.print("\n");
  }
}

// The call object template of a method: for unary ones `unary_call` (member_server_call for
// Service, callback_server_call for CallbackService).
std::string call_template(const method_model& m, const std::string& unary_call) {
  switch (m.kind) {
    case method_kind::unary: return unary_call;
    case method_kind::client_streaming: return "client_streaming_call";
    case method_kind::server_streaming: return "server_streaming_call";
    case method_kind::bidi_streaming: return "bidi_streaming_call";
  }
  return unary_call;
}

// The body of new_call (streaming = false) or new_stream_call (true): a case per method of that
// kind, null for any other index.
void print_call_switch(code_writer& p, const service_model& s, const std::string& qclass,
                       const std::string& unary_call, bool streaming) {
  bool any = false;
  for (std::size_t i = 0; i < s.methods.size(); ++i) {
    const method_model& m = s.methods[i];
    if (m.streaming() != streaming) continue;
    if (!any) p.print("  switch (index) {\n");
    any = true;
    const vars v = {{"index", std::to_string(i)},
                    {"qclass", qclass},
                    {"call_class", call_template(m, unary_call)},
                    {"proto_name", m.proto_name},
                    {"handler", m.names.handler},
                    {"request", m.request_type},
                    {"response", m.response_type}};
    p.print(v, "    case $index$:  // rpc $proto_name$\n");
    // Naming a deprecated handler is the one use of it generated code makes: silence just that.
    if (m.deprecated) {
      p.print(
          "#pragma GCC diagnostic push\n"
          "#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"\n");
    }
    p.print(v,
            "      return ::std::make_unique<::rdmarpc::$call_class$<$qclass$, $request$, $response$>>(\n"
            "          *this, &$qclass$::$handler$);\n");
    if (m.deprecated) p.print("#pragma GCC diagnostic pop\n");
  }
  if (any) {
    p.print(
        "    default:\n"
        "      break;\n"
        "  }\n");
  } else {
    p.print("  static_cast<void>(index);\n");
  }
}

// `kind` is "Service" (coroutine handlers, member_server_call) or "CallbackService"
// (callback_server_call); streaming methods use the same stream call templates in both.
void print_service(code_writer& p, const file_model& file, const service_model& s, const std::string& kind) {
  const std::string qclass = qualified_class(file, s) + "::" + kind;
  const std::string call_class = kind == "Service" ? "member_server_call" : "callback_server_call";
  p.print({{"qclass", qclass}, {"qservice", qualified_class(file, s)}},
          "auto $qclass$::full_name() const noexcept -> ::std::string_view {\n"
          "  return $qservice$::service_full_name;\n"
          "}\n"
          "\n"
          "auto $qclass$::methods() const noexcept -> ::std::span<const "
          "::rdmarpc::method_descriptor> {\n"
          "  return $qservice$::method_descriptors;\n"
          "}\n"
          "\n"
          "auto $qclass$::new_call(::std::size_t index) -> "
          "::std::unique_ptr<::rdmarpc::server_call> {\n");
  print_call_switch(p, s, qclass, call_class, false);
  p.print(
      "  return nullptr;  // a streaming method or out of range (the server answers UNIMPLEMENTED)\n"
      "}\n"
      "\n");
  if (!s.has_streaming()) return;
  p.print({{"qclass", qclass}},
          "auto $qclass$::new_stream_call(::std::size_t index) -> "
          "::std::unique_ptr<::rdmarpc::server_stream_call> {\n");
  print_call_switch(p, s, qclass, call_class, true);
  p.print(
      "  return nullptr;  // a unary method or out of range\n"
      "}\n"
      "\n");
}

}  // namespace

std::string emit_source(const file_model& file) {
  code_writer p;
  p.print_raw(generated_stamp(file));
  p.print({{"header", file.header_name()}}, "\n#include \"$header$\"\n");
  if (file.services.empty()) return p.take();
  p.print(
      "\n"
      "#include <cstdint>\n"
      "#include <memory>\n"
      "#include <span>\n"
      "#include <typeinfo>\n"
      "#include <utility>\n"
      "\n");
  for (const service_model& s : file.services) {
    p.print({{"full_name", s.full_name}}, "// service $full_name$\n\n");
    print_parsers(p, file, s);
    print_stub(p, file, s);
    print_service(p, file, s, "Service");
    print_service(p, file, s, "CallbackService");
  }
  return p.take();
}

}  // namespace rdmarpc::codegen
