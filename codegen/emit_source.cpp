// Prints foo.rdmarpc.pb.cc: the Stub's calls into rdmarpc::async_unary_call and the new_call of
// Service and CallbackService (a typed call object per method; the server parses, runs and replies through
// it).

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
    p.print({{"qclass", qualified_class(file, s)},
             {"do", m.names.do_name},
             {"descriptor", m.names.descriptor},
             {"request", m.request_type},
             {"response", m.response_type}},
            "void $qclass$::Stub::$do$(::rdmarpc::client_context* context, const $request$& request,\n"
            "    ::boost::asio::any_completion_handler<void(::boost::system::error_code, $response$)> "
            "handler) {\n"
            "  ::rdmarpc::async_unary_call<$response$>(*channel_, $qclass$::$descriptor$, context, request,\n"
            "                                         ::std::move(handler));\n"
            "}\n"
            "\n");
  }
}

// `kind` is "Service" (coroutine handlers, member_server_call) or "CallbackService"
// (callback_server_call).
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
  if (s.methods.empty()) {
    p.print("  static_cast<void>(index);\n");
  } else {
    p.print("  switch (index) {\n");
    for (std::size_t i = 0; i < s.methods.size(); ++i) {
      const method_model& m = s.methods[i];
      p.print({{"index", std::to_string(i)},
               {"qclass", qclass},
               {"call_class", call_class},
               {"proto_name", m.proto_name},
               {"handler", m.names.handler},
               {"request", m.request_type},
               {"response", m.response_type}},
              "    case $index$:  // rpc $proto_name$\n"
              "      return ::std::make_unique<::rdmarpc::$call_class$<$qclass$, $request$, $response$>>(\n"
              "          *this, &$qclass$::$handler$);\n");
    }
    p.print(
        "    default:\n"
        "      break;\n"
        "  }\n");
  }
  p.print(
      "  return nullptr;  // the server answers UNIMPLEMENTED\n"
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
