// rdmarpc call URI SERVICE/METHOD [JSON]: the request(s) from JSON (argument, -d TEXT, -d @FILE,
// -d @-), each reply printed as one line of JSON as it arrives.
//   unary             one call per request, in order; stops at the first that fails
//   server streaming  one stream per request; a line per message
//   client streaming  one stream carrying every request; the reply's line
//   bidi streaming    one stream: every request written while the replies are printed

#include <google/protobuf/dynamic_message.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <iostream>
#include <memory>
#include <vector>

#include "cli_error.hpp"
#include "commands.hpp"
#include "descriptor_source.hpp"
#include "generic_call.hpp"
#include "json_io.hpp"
#include "session.hpp"

namespace rdmarpc::cli {

namespace {

namespace gp = google::protobuf;
namespace asio = boost::asio;
using boost::system::error_code;
constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);

class caller {
 public:
  caller(session& s, const method_ref& method, const gp::Message& reply_prototype)
      : session_(s), method_(method), reply_(reply_prototype.New()) {
    name_ = method.method().service()->full_name() + "/" + method.method().name();
  }

  void unary(const gp::Message& request) {
    client_context context;
    session_.prepare(context);
    const auto ec = session_.run(call(request, context));
    if (ec) throw session_.call_failed(name_, ec, context);
    print(*reply_);
  }

  // Server streaming (one request), client streaming and bidi (all of them on one stream).
  void stream(const std::vector<const gp::Message*>& requests) {
    client_context context;
    session_.prepare(context);
    const bool server_streaming = method_.kind() == rpc_kind::server_streaming;
    generic_stream stream(session_.channel().start_stream(method_.descriptor(), &context,
                                                          server_streaming ? requests.front() : nullptr));
    // Ctrl-C (or SIGTERM) ends a stream the way a client should: cancelled, the server told.
    asio::signal_set signals(session_.io(), SIGINT, SIGTERM);
    signals.async_wait([&stream](error_code ec, int) {
      if (!ec) stream.cancel();
    });
    const auto ec = session_.run(run_stream(stream, server_streaming ? nullptr : &requests));
    signals.cancel();
    if (ec) throw session_.call_failed(name_, ec, context);
  }

 private:
  asio::awaitable<error_code> call(const gp::Message& request, client_context& context) {
    auto [ec] = co_await async_generic_call(session_.channel(), method_.descriptor(), &context, request,
                                            *reply_, kAwait);
    co_return ec;
  }

  asio::awaitable<error_code> write_all(generic_stream& stream,
                                        const std::vector<const gp::Message*>& requests) {
    error_code ec;
    for (const auto& r : requests) {
      std::tie(ec) = co_await stream.async_write(*r, kAwait);
      if (ec) co_return ec;
    }
    std::tie(ec) = co_await stream.async_writes_done(kAwait);
    co_return ec;
  }

  asio::awaitable<error_code> read_all(generic_stream& stream) {
    for (;;) {
      auto [ec] = co_await stream.async_read(*reply_, kAwait);
      if (ec) co_return is_end_of_stream(ec) ? error_code{} : ec;
      print(*reply_);
    }
  }

  asio::awaitable<error_code> run_stream(generic_stream& stream,
                                         const std::vector<const gp::Message*>* requests) {
    using namespace asio::experimental::awaitable_operators;
    if (requests != nullptr) {
      // A failed write or read ends the stream; finish() below says why, so their codes are not needed.
      co_await (write_all(stream, *requests) && read_all(stream));
    } else {
      co_await read_all(stream);
    }
    auto [status] = co_await stream.async_finish(kAwait);
    co_return status;
  }

  void print(const gp::Message& message) const {
    std::cout << to_json_line(message, session_.opts().emit_defaults) << std::endl;
  }

  session& session_;
  const method_ref& method_;
  std::unique_ptr<gp::Message> reply_;
  std::string name_;
};

}  // namespace

int run_call(const options& o) {
  if (o.arguments.empty())
    throw cli_error(kExitUsage, "call needs SERVICE/METHOD (rdmarpc list URI shows them)");
  if (o.arguments.size() > 2)
    throw cli_error(kExitUsage, "call takes SERVICE/METHOD and at most one JSON request");
  session s(o);
  auto source = make_descriptor_source(o, s);
  const method_ref method(find_method(*source, o.arguments[0]));
  gp::DynamicMessageFactory factory(&source->pool());
  const gp::Message* request_prototype = factory.GetPrototype(method.method().input_type());
  const gp::Message* reply_prototype = factory.GetPrototype(method.method().output_type());

  const auto texts = split_json_objects(request_text(o, 1));
  if (texts.empty()) throw cli_error(kExitBadInput, "no request given (the input holds no JSON object)");
  std::vector<std::unique_ptr<gp::Message>> requests;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    requests.emplace_back(request_prototype->New());
    try {
      parse_json(texts[i], *requests.back());
    } catch (const cli_error& e) {
      if (texts.size() == 1) throw;
      throw cli_error(e.exit_status(), "request " + std::to_string(i + 1) + ": " + e.what());
    }
  }

  caller c(s, method, *reply_prototype);
  switch (method.kind()) {
    case rpc_kind::unary:
      for (const auto& r : requests) c.unary(*r);
      break;
    case rpc_kind::server_streaming:
      for (const auto& r : requests) c.stream({r.get()});
      break;
    case rpc_kind::client_streaming:
    case rpc_kind::bidi_streaming: {
      std::vector<const gp::Message*> all;
      for (const auto& r : requests) all.push_back(r.get());
      c.stream(all);
      break;
    }
  }
  return kExitOk;
}

}  // namespace rdmarpc::cli
