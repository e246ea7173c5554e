// Prints foo.rdmarpc.pb.h: per service a holder class with method descriptors, the client
// Interface, the Stub and the abstract Service and CallbackService (see notes/GENERATED_API.md for the
// contract).

#include "emit.hpp"
#include "template.hpp"

namespace rdmarpc::codegen {
namespace {

std::string signature_of(const method_model& m) {
  return "void(::boost::system::error_code, " + m.response_type + ")";
}

vars method_vars(const service_model& s, const method_model& m) {
  return {
      {"class", s.class_name},
      {"proto_name", m.proto_name},
      {"full_name", cpp_string_literal(m.full_name)},
      {"handler", m.names.handler},
      {"async", m.names.async_name},
      {"do", m.names.do_name},
      {"descriptor", m.names.descriptor},
      {"request", m.request_type},
      {"response", m.response_type},
      {"signature", signature_of(m)},
  };
}

void print_descriptors(code_writer& p, const service_model& s) {
  p.print({{"class", s.class_name}, {"full_name", cpp_string_literal(s.full_name)}},
          "  $class$() = delete;  // a scope for the service's types, never an object\n"
          "\n"
          "  static constexpr ::std::string_view service_full_name = $full_name$;\n");
  for (const method_model& m : s.methods) {
    p.print(method_vars(s, m),
            "  static constexpr ::rdmarpc::method_descriptor $descriptor${$full_name$, "
            "::rdmarpc::method_id($full_name$)};\n");
  }
  std::string list;
  for (const method_model& m : s.methods) {
    if (!list.empty()) list += ", ";
    list += m.names.descriptor;
  }
  p.print({{"count", std::to_string(s.methods.size())}, {"list", list}},
          "  // In declaration order; Service::methods() and new_call() index into it.\n"
          "  static constexpr ::std::array<::rdmarpc::method_descriptor, $count$> "
          "method_descriptors{{$list$}};\n");
}

void print_interface(code_writer& p, const service_model& s) {
  p.print(
      "\n"
      "  // The client as user code sees it. Stub implements it over an rdmarpc::channel; a test can\n"
      "  // derive a fake from it and override the do_* functions.\n"
      "  // Each async_* function has the completion signature void(error_code, Reply), so a callback,\n"
      "  // use_future, use_awaitable, as_tuple(use_awaitable) or deferred all work; errors are in\n"
      "  // rdmarpc::status_category(). `request` (and `context`) must stay valid until the operation\n"
      "  // has started (for deferred: until it is launched), `context` until it completes.\n"
      "  class Interface {\n"
      "   public:\n"
      "    virtual ~Interface() = default;\n");
  for (const method_model& m : s.methods) {
    p.print(method_vars(s, m),
            "\n"
            "    // rpc $proto_name$\n"
            "    template <typename CompletionToken>\n"
            "    auto $async$(const $request$& request, CompletionToken&& token) {\n"
            "      return ::boost::asio::async_initiate<CompletionToken, $signature$>(\n"
            "          [this](auto handler, const $request$* req) {\n"
            "            this->$do$(nullptr, *req, "
            "::boost::asio::any_completion_handler<$signature$>(::std::move(handler)));\n"
            "          },\n"
            "          token, &request);\n"
            "    }\n"
            "    template <typename CompletionToken>\n"
            "    auto $async$(::rdmarpc::client_context& context, const $request$& request, "
            "CompletionToken&& token) {\n"
            "      return ::boost::asio::async_initiate<CompletionToken, $signature$>(\n"
            "          [this](auto handler, ::rdmarpc::client_context* ctx, const $request$* req) {\n"
            "            this->$do$(ctx, *req, "
            "::boost::asio::any_completion_handler<$signature$>(::std::move(handler)));\n"
            "          },\n"
            "          token, &context, &request);\n"
            "    }\n");
  }
  if (!s.methods.empty()) {
    p.print("\n   protected:\n");
  }
  for (const method_model& m : s.methods) {
    p.print(method_vars(s, m),
            "    virtual void $do$(::rdmarpc::client_context* context, const $request$& request,\n"
            "        ::boost::asio::any_completion_handler<$signature$> handler) = 0;\n");
  }
  p.print("  };\n");
}

void print_stub(code_writer& p, const service_model& s) {
  p.print(
      "\n"
      "  // The real client: each call goes through rdmarpc::async_unary_call on the channel.\n"
      "  // Threading: as the channel's (calls may start from any thread).\n"
      "  class Stub final : public Interface {\n"
      "   public:\n"
      "    // `channel` must not be null.\n"
      "    explicit Stub(::std::shared_ptr<::rdmarpc::channel> channel) noexcept : "
      "channel_(::std::move(channel)) {}\n"
      "    const ::std::shared_ptr<::rdmarpc::channel>& channel() const noexcept { return channel_; }\n"
      "\n"
      "   private:\n");
  if (s.methods.empty()) p.print("    // (the service has no methods)\n");
  for (const method_model& m : s.methods) {
    p.print(method_vars(s, m),
            "    void $do$(::rdmarpc::client_context* context, const $request$& request,\n"
            "        ::boost::asio::any_completion_handler<$signature$> handler) override;\n");
  }
  p.print(
      "\n"
      "    ::std::shared_ptr<::rdmarpc::channel> channel_;\n"
      "  };\n");
}

// One server base: `intro` is its comment and class line, `handler` the declaration printed per
// method (with method_vars).
void print_server_base(code_writer& p, const service_model& s, const char* intro, const char* handler) {
  p.print(intro);
  for (const method_model& m : s.methods) p.print(method_vars(s, m), handler);
  p.print(
      "\n"
      "    ::std::string_view full_name() const noexcept override;\n"
      "    ::std::span<const ::rdmarpc::method_descriptor> methods() const noexcept override;\n"
      "    ::std::unique_ptr<::rdmarpc::server_call> new_call(::std::size_t index) override;\n"
      "  };\n");
}

void print_service(code_writer& p, const service_model& s) {
  print_server_base(
      p, s,
      "\n"
      "  // The server side: derive from it, implement every handler and register the object with\n"
      "  // rdmarpc::server::add_service. A handler reports an error by throwing rdmarpc::status_error\n"
      "  // or by calling context.set_status() (its reply is then not sent); any other exception\n"
      "  // answers INTERNAL. Each call runs as a coroutine (co_spawn); CallbackService is cheaper.\n"
      "  class Service : public ::rdmarpc::service {\n"
      "   public:\n",
      "    // rpc $proto_name$\n"
      "    virtual ::boost::asio::awaitable<$response$> $handler$(::rdmarpc::server_context& context,\n"
      "        const $request$& request) = 0;\n");
}

void print_callback_service(code_writer& p, const service_model& s) {
  print_server_base(
      p, s,
      "\n"
      "  // The server side without coroutines, for handlers that usually answer at once: each handler\n"
      "  // fills `reply` and invokes `done` (before returning: no coroutine, no allocation, no\n"
      "  // scheduler hop; or later, from any thread). Errors: context.set_status() then done(); an\n"
      "  // exception escaping the handler answers INTERNAL (status_error: its status); dropping\n"
      "  // `done` without invoking it answers INTERNAL. After done(), context, request and reply\n"
      "  // must not be touched. Cancellation: context.is_cancelled().\n"
      "  class CallbackService : public ::rdmarpc::service {\n"
      "   public:\n",
      "    // rpc $proto_name$\n"
      "    virtual void $handler$(::rdmarpc::server_context& context, const $request$& request,\n"
      "        $response$& reply, ::rdmarpc::server_done done) = 0;\n");
}

void print_namespace_open(code_writer& p, const file_model& file) {
  if (!file.cpp_namespace.empty()) p.print({{"ns", file.cpp_namespace}}, "namespace $ns$ {\n\n");
}

void print_namespace_close(code_writer& p, const file_model& file) {
  if (!file.cpp_namespace.empty()) p.print({{"ns", file.cpp_namespace}}, "}  // namespace $ns$\n");
}

}  // namespace

std::string generated_stamp(const file_model& file) {
  return "// Generated by protoc-gen-rdmarpc from " + file.proto_name + ". DO NOT EDIT.\n";
}

std::string emit_header(const file_model& file) {
  code_writer p;
  p.print_raw(generated_stamp(file));
  p.print({{"pb_h", file.protobuf_header_name()}},
          "// Client interface, stub and server base for the services of this file.\n"
          "#pragma once\n"
          "\n"
          "#include \"$pb_h$\"\n");
  if (file.services.empty()) {
    p.print({{"proto", file.proto_name}}, "\n// $proto$ declares no services.\n");
    return p.take();
  }
  p.print(
      "#include \"rpc/service.hpp\"\n"
      "#include \"rpc/unary_call.hpp\"\n"
      "\n"
      "#include <boost/asio/any_completion_handler.hpp>\n"
      "#include <boost/asio/async_result.hpp>\n"
      "#include <boost/asio/awaitable.hpp>\n"
      "#include <boost/system/error_code.hpp>\n"
      "\n"
      "#include <array>\n"
      "#include <cstddef>\n"
      "#include <memory>\n"
      "#include <span>\n"
      "#include <string>\n"
      "#include <string_view>\n"
      "#include <utility>\n"
      "\n");
  print_namespace_open(p, file);
  for (const service_model& s : file.services) {
    p.print({{"class", s.class_name}, {"full_name", s.full_name}},
            "// service $full_name$\n"
            "class $class$ final {\n"
            " public:\n");
    print_descriptors(p, s);
    print_interface(p, s);
    print_stub(p, s);
    print_service(p, s);
    print_callback_service(p, s);
    p.print("};\n\n");
  }
  print_namespace_close(p, file);
  return p.take();
}

}  // namespace rdmarpc::codegen
