// Prints foo.rdmarpc.pb.h: per service a holder class with method descriptors, the client
// Interface, the Stub and the abstract Service and CallbackService (see docs/generated-api.md for the
// contract). Unary and streaming methods differ in their client function, do_* and handler.

#include "emit.hpp"
#include "template.hpp"

namespace rdmarpc::codegen {
namespace {

std::string signature_of(const method_model& m) {
  return "void(::boost::system::error_code, " + m.response_type + ")";
}

const char* kind_name(method_kind kind) {
  switch (kind) {
    case method_kind::unary: return "unary";
    case method_kind::client_streaming: return "client_streaming";
    case method_kind::server_streaming: return "server_streaming";
    case method_kind::bidi_streaming: return "bidi_streaming";
  }
  return "unary";
}

vars method_vars(const service_model& s, const method_model& m) {
  return {
      {"class", s.class_name},
      {"proto_name", m.proto_name},
      {"full_name", cpp_string_literal(m.full_name)},
      {"kind", kind_name(m.kind)},
      {"request_may_lack_required", m.request_may_lack_required ? "true" : "false"},
      {"reply_may_lack_required", m.reply_may_lack_required ? "true" : "false"},
      {"request_parser", m.request_parser.empty() ? "nullptr" : "&message_parsers::" + m.request_parser},
      {"reply_parser", m.reply_parser.empty() ? "nullptr" : "&message_parsers::" + m.reply_parser},
      {"handler", m.names.handler},
      {"async", m.names.async_name},
      {"stream", m.names.stream_name},
      {"do", m.names.do_name},
      {"descriptor", m.names.descriptor},
      {"request", m.request_type},
      {"response", m.response_type},
      {"signature", signature_of(m)},
      {"client_stream", "::rdmarpc::client_stream<" + m.request_type + ", " + m.response_type + ">"},
      // The client functions and handlers of an rpc with `option deprecated = true;`.
      {"deprecated", m.deprecated ? "[[deprecated]] " : ""},
      {"deprecated_note", m.deprecated ? " (deprecated)" : ""},
  };
}

void print_descriptors(code_writer& p, const service_model& s) {
  p.print({{"class", s.class_name}, {"full_name", cpp_string_literal(s.full_name)}},
          "  $class$() = delete;  // a scope for the service's types, never an object\n"
          "\n"
          "  static constexpr ::std::string_view service_full_name = $full_name$;\n");
  if (!s.parsers.empty()) {
    p.print(
        "  // Parsers of the unary methods' plain request and reply types (rdmarpc::message_parser).\n"
        "  struct message_parsers {\n");
    for (const parser_model& m : s.parsers) {
      p.print({{"function", m.function}, {"proto_name", m.proto_name}},
              "    static bool $function$(::google::protobuf::MessageLite& into, "
              "::std::span<const ::std::byte> bytes);  // $proto_name$\n");
    }
    p.print("  };\n");
  }
  for (const method_model& m : s.methods) {
    p.print(method_vars(s, m),
            "  static constexpr ::rdmarpc::method_descriptor $descriptor${$full_name$, "
            "::rdmarpc::method_id($full_name$), ::rdmarpc::rpc_kind::$kind$, "
            "$request_may_lack_required$, $reply_may_lack_required$, $request_parser$, $reply_parser$};\n");
  }
  std::string list;
  for (const method_model& m : s.methods) {
    if (!list.empty()) list += ", ";
    list += m.names.descriptor;
  }
  p.print({{"count", std::to_string(s.methods.size())}, {"list", list}},
          "  // In declaration order; Service::methods(), new_call() and new_stream_call() index into it.\n"
          "  static constexpr ::std::array<::rdmarpc::method_descriptor, $count$> "
          "method_descriptors{{$list$}};\n");
}

void print_client_function(code_writer& p, const service_model& s, const method_model& m) {
  switch (m.kind) {
    case method_kind::unary:
      p.print(
          method_vars(s, m),
          "\n"
          "    // rpc $proto_name$$deprecated_note$\n"
          "    template <::boost::asio::completion_token_for<$signature$> CompletionToken>\n"
          "    $deprecated$auto $async$(const $request$& request, CompletionToken&& token) {\n"
          "      return ::boost::asio::async_initiate<CompletionToken, $signature$>(\n"
          "          [this](auto handler, const $request$* req) {\n"
          "            this->$do$(nullptr, *req, "
          "::rdmarpc::unary_completion<$response$>::make(::std::move(handler)));\n"
          "          },\n"
          "          token, &request);\n"
          "    }\n"
          "    template <::boost::asio::completion_token_for<$signature$> CompletionToken>\n"
          "    $deprecated$auto $async$(::rdmarpc::client_context& context, const $request$& request, "
          "CompletionToken&& token) {\n"
          "      return ::boost::asio::async_initiate<CompletionToken, $signature$>(\n"
          "          [this](auto handler, ::rdmarpc::client_context* ctx, const $request$* req) {\n"
          "            this->$do$(ctx, *req, "
          "::rdmarpc::unary_completion<$response$>::make(::std::move(handler)));\n"
          "          },\n"
          "          token, &context, &request);\n"
          "    }\n"
          "    // The same, parsing the reply into the caller's `reply` (void(error_code)): see\n"
          "    // rdmarpc::async_unary_call. Reused call after call, it builds no reply per call.\n"
          "    // (Tokens are constrained, so a forgotten token is \"no matching function\", not an error\n"
          "    // deep in Asio.)\n"
          "    template <::boost::asio::completion_token_for<void(::boost::system::error_code)> "
          "CompletionToken>\n"
          "    $deprecated$auto $async$(const $request$& request, $response$& reply, "
          "CompletionToken&& token) {\n"
          "      return ::boost::asio::async_initiate<CompletionToken, void(::boost::system::error_code)>(\n"
          "          [this](auto handler, const $request$* req, $response$* out) {\n"
          "            this->$do$(nullptr, *req, "
          "::rdmarpc::unary_completion<$response$>::make_into(*out, ::std::move(handler)));\n"
          "          },\n"
          "          token, &request, &reply);\n"
          "    }\n"
          "    template <::boost::asio::completion_token_for<void(::boost::system::error_code)> "
          "CompletionToken>\n"
          "    $deprecated$auto $async$(::rdmarpc::client_context& context, const $request$& request, "
          "$response$& reply, CompletionToken&& token) {\n"
          "      return ::boost::asio::async_initiate<CompletionToken, void(::boost::system::error_code)>(\n"
          "          [this](auto handler, ::rdmarpc::client_context* ctx, const $request$* req, "
          "$response$* out) {\n"
          "            this->$do$(ctx, *req, "
          "::rdmarpc::unary_completion<$response$>::make_into(*out, ::std::move(handler)));\n"
          "          },\n"
          "          token, &context, &request, &reply);\n"
          "    }\n");
      return;
    case method_kind::server_streaming:
      p.print(
          method_vars(s, m),
          "\n"
          "    // rpc $proto_name$, server streaming$deprecated_note$: `request` is sent and the writes are\n"
          "    // done at once; read the replies until end of stream, then async_finish.\n"
          "    $deprecated$$client_stream$ $stream$(const $request$& request) {\n"
          "      return $client_stream$(this->$do$(nullptr, request));\n"
          "    }\n"
          "    $deprecated$$client_stream$ $stream$(::rdmarpc::client_context& context, "
          "const $request$& request) {\n"
          "      return $client_stream$(this->$do$(&context, request));\n"
          "    }\n");
      return;
    case method_kind::client_streaming:
    case method_kind::bidi_streaming:
      p.print(
          method_vars(s, m),
          m.kind == method_kind::client_streaming
              ? "\n"
                "    // rpc $proto_name$, client streaming$deprecated_note$: write requests, "
                "async_writes_done,\n"
                "    // then async_read the one reply and async_finish.\n"
              : "\n"
                "    // rpc $proto_name$, bidirectional streaming$deprecated_note$: reads and writes in any\n"
                "    // order; async_writes_done, read until end of stream, then async_finish.\n");
      p.print(method_vars(s, m),
              "    $deprecated$$client_stream$ $stream$() { return $client_stream$(this->$do$(nullptr)); }\n"
              "    $deprecated$$client_stream$ $stream$(::rdmarpc::client_context& context) {\n"
              "      return $client_stream$(this->$do$(&context));\n"
              "    }\n");
      return;
  }
}

// The protected virtual behind a client function: pure in Interface, an override in Stub.
void print_do_function(code_writer& p, const service_model& s, const method_model& m, bool pure) {
  vars v = method_vars(s, m);
  v["virtual"] = pure ? "virtual " : "";
  v["tail"] = pure ? "= 0" : "override";
  switch (m.kind) {
    case method_kind::unary:
      p.print(v,
              "    $virtual$void $do$(::rdmarpc::client_context* context, const $request$& request,\n"
              "        ::rdmarpc::unary_completion<$response$> done) $tail$;\n");
      return;
    case method_kind::server_streaming:
      p.print(
          v,
          "    $virtual$::std::shared_ptr<::rdmarpc::stream_io> $do$(::rdmarpc::client_context* context,\n"
          "        const $request$& request) $tail$;\n");
      return;
    case method_kind::client_streaming:
    case method_kind::bidi_streaming:
      p.print(v,
              "    $virtual$::std::shared_ptr<::rdmarpc::stream_io> $do$(::rdmarpc::client_context* context) "
              "$tail$;\n");
      return;
  }
}

void print_interface(code_writer& p, const service_model& s) {
  p.print(
      "\n"
      "  // The client as user code sees it. Stub implements it over an rdmarpc::channel; a test can\n"
      "  // derive a fake from it and override the do_* functions (a unary one completes its\n"
      "  // rdmarpc::unary_completion with (error_code, Reply) from work it posted, "
      "rpc/unary_completion.hpp).\n"
      "  // Each async_* function has the completion signature void(error_code, Reply) (void(error_code)\n"
      "  // when it is given the caller's own reply message to fill), so a callback,\n"
      "  // use_future, use_awaitable, as_tuple(use_awaitable) or deferred all work; errors are in\n"
      "  // rdmarpc::status_category(). `request` (and `context`) must stay valid until the operation\n"
      "  // has started (for deferred: until it is launched), `context` until it completes; a `reply`\n"
      "  // passed in is written by the call until it completes (cleared if it fails).\n");
  if (s.has_streaming()) {
    p.print(
        "  // A streaming rpc's function opens the stream at once and returns its rdmarpc::client_stream\n"
        "  // (rpc/stream.hpp: every operation takes any completion token). `request` is serialized\n"
        "  // before it returns; `context` must stay valid until the stream finished. It never fails\n"
        "  // itself: errors end the stream, and its operations report them.\n");
  }
  p.print(
      "  class Interface {\n"
      "   public:\n"
      "    virtual ~Interface() = default;\n");
  for (const method_model& m : s.methods) print_client_function(p, s, m);
  if (!s.methods.empty()) {
    p.print("\n   protected:\n");
  }
  for (const method_model& m : s.methods) print_do_function(p, s, m, true);
  p.print("  };\n");
}

void print_stub(code_writer& p, const service_model& s) {
  p.print(
      "\n"
      "  // The real client: each call goes through channel::start_unary_call, each\n"
      "  // stream through channel::start_stream.\n"
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
  for (const method_model& m : s.methods) print_do_function(p, s, m, false);
  p.print(
      "\n"
      "    ::std::shared_ptr<::rdmarpc::channel> channel_;\n"
      "  };\n");
}

// A streaming handler: the same coroutine in Service and CallbackService.
void print_stream_handler(code_writer& p, const service_model& s, const method_model& m) {
  switch (m.kind) {
    case method_kind::unary: return;
    case method_kind::server_streaming:
      p.print(
          method_vars(s, m),
          "    // rpc $proto_name$, server streaming$deprecated_note$: write the replies; the stream ends\n"
          "    // when the coroutine returns.\n"
          "    $deprecated$virtual ::boost::asio::awaitable<void> $handler$(::rdmarpc::server_context& "
          "context,\n"
          "        const $request$& request, ::rdmarpc::server_writer<$response$>& writer) = 0;\n");
      return;
    case method_kind::client_streaming:
      p.print(
          method_vars(s, m),
          "    // rpc $proto_name$, client streaming$deprecated_note$: read requests until end of stream;\n"
          "    // the returned reply is sent.\n"
          "    $deprecated$virtual ::boost::asio::awaitable<$response$> $handler$(::rdmarpc::server_context& "
          "context,\n"
          "        ::rdmarpc::server_reader<$request$>& reader) = 0;\n");
      return;
    case method_kind::bidi_streaming:
      p.print(
          method_vars(s, m),
          "    // rpc $proto_name$, bidirectional streaming$deprecated_note$: read until end of stream and\n"
          "    // write in any order; the stream ends when the coroutine returns.\n"
          "    $deprecated$virtual ::boost::asio::awaitable<void> $handler$(::rdmarpc::server_context& "
          "context,\n"
          "        ::rdmarpc::server_reader_writer<$request$, $response$>& stream) = 0;\n");
      return;
  }
}

// One server base: `intro` is its comment and class line, `handler` the declaration printed per
// unary method (with method_vars).
void print_server_base(code_writer& p, const service_model& s, const char* intro, const char* handler) {
  p.print(intro);
  for (const method_model& m : s.methods) {
    if (m.streaming()) {
      print_stream_handler(p, s, m);
    } else {
      p.print(method_vars(s, m), handler);
    }
  }
  p.print(
      "\n"
      "    ::std::string_view full_name() const noexcept override;\n"
      "    ::std::span<const ::rdmarpc::method_descriptor> methods() const noexcept override;\n"
      "    ::std::unique_ptr<::rdmarpc::server_call> new_call(::std::size_t index) override;\n");
  if (s.has_streaming()) {
    p.print(
        "    ::std::unique_ptr<::rdmarpc::server_stream_call> new_stream_call(::std::size_t index) "
        "override;\n");
  }
  p.print("  };\n");
}

void print_service(code_writer& p, const service_model& s) {
  print_server_base(
      p, s,
      "\n"
      "  // The server side: derive from it, implement every handler and register the object with\n"
      "  // rdmarpc::server::add_service. A handler reports an error by throwing rdmarpc::status_error\n"
      "  // or by calling context.set_status() (its reply is then not sent); any other exception\n"
      "  // answers INTERNAL. Each call runs as a coroutine; CallbackService is cheaper.\n"
      "  class Service : public ::rdmarpc::service {\n"
      "   public:\n",
      "    // rpc $proto_name$$deprecated_note$\n"
      "    $deprecated$virtual ::boost::asio::awaitable<$response$> $handler$(::rdmarpc::server_context& "
      "context,\n"
      "        const $request$& request) = 0;\n");
}

void print_callback_service(code_writer& p, const service_model& s) {
  print_server_base(
      p, s,
      "\n"
      "  // The server side without coroutines, for handlers that usually answer at once: each handler\n"
      "  // fills `reply` and invokes `done` (before returning, on its thread: no coroutine, no\n"
      "  // allocation, no scheduler hop; or moved, later, from any thread). Errors: context.set_status()\n"
      "  // then done(); an exception escaping the handler answers INTERNAL (status_error: its status);\n"
      "  // dropping `done` without invoking it answers INTERNAL. After done(), context, request and\n"
      "  // reply must not be touched. Cancellation: context.is_cancelled(). Streaming handlers are\n"
      "  // coroutines as in Service (a stream outlives one callback anyway).\n"
      "  class CallbackService : public ::rdmarpc::service {\n"
      "   public:\n",
      "    // rpc $proto_name$$deprecated_note$\n"
      "    $deprecated$virtual void $handler$(::rdmarpc::server_context& context, const $request$& request,\n"
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
      "#include <rdmarpc/channel.hpp>\n"
      "#include <rdmarpc/message_parser.hpp>\n"
      "#include <rdmarpc/service.hpp>\n"
      "#include <rdmarpc/stream.hpp>\n"
      "#include <rdmarpc/unary_call.hpp>\n"
      "#include <rdmarpc/unary_completion.hpp>\n"
      "\n"
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
