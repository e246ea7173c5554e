// Prints foo.rdmarpc.pb.cc: the Stub's calls into channel::start_unary_call (streams:
// channel::start_stream) and the new_call / new_stream_call of Service and CallbackService (a typed
// call object per method; the server parses, runs and replies through it).

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
      "#include <memory>\n"
      "#include <utility>\n"
      "\n");
  for (const service_model& s : file.services) {
    p.print({{"full_name", s.full_name}}, "// service $full_name$\n\n");
    print_stub(p, file, s);
    print_service(p, file, s, "Service");
    print_service(p, file, s, "CallbackService");
  }
  return p.take();
}

}  // namespace rdmarpc::codegen
