// libFuzzer target: a whole server fed arbitrary messages through the loopback transport. Behind
// it: the rpc tests' test_service (unary, the three stream kinds, metadata, failures) and the
// generated streams::Events (a CallbackService from protoc-gen-rdmarpc). Each input is a fresh
// server and connection; the io_context runs until idle after every message, with a bound on the
// handlers run per input, then the connection closes and everything must wind down: no crash, no
// sanitizer report, no leak (libFuzzer checks per input), no work left behind (no hang).
//
// Input: u8 options (bit 0: small limits; bit 1: close from the client side at the end instead of
// dropping the connection; bit 2: the server shuts down gracefully first), then messages, each a
// u16 little-endian length and that many bytes, delivered in order as transport messages.
#include <google/protobuf/stubs/logging.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>

#include "fuzz_input.hpp"
#include "rpc/server.hpp"
#include "streams.rdmarpc.pb.h"
#include "test_service.hpp"
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;
namespace asio = boost::asio;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in a string field, at every run
  return 0;
}

namespace {

// The generated service: Get answers through a callback, the streams are coroutines.
class events final : public streams::Events::CallbackService {
  void get(server_context&, const streams::Item& request, streams::Item& reply, server_done done) override {
    reply = request;
    reply.set_text("got " + request.text());
    done();
  }
  asio::awaitable<void> watch(server_context&, const streams::Item& request,
                              server_writer<streams::Item>& writer) override {
    for (std::int64_t i = 0; i < request.id(); ++i) {
      streams::Item item;
      item.set_id(i);
      co_await writer.async_write(item, asio::use_awaitable);
    }
  }
  asio::awaitable<streams::Summary> upload(server_context&, server_reader<streams::Item>& reader) override {
    streams::Summary summary;
    streams::Item item;
    while (true) {
      auto [ec] = co_await reader.async_read(item, asio::as_tuple(asio::use_awaitable));
      if (is_end_of_stream(ec)) break;
      if (ec) throw boost::system::system_error(ec);
      summary.set_count(summary.count() + 1);
      summary.set_last(item.text());
    }
    co_return summary;
  }
  asio::awaitable<void> chat(server_context&,
                             server_reader_writer<streams::Item, streams::Summary>& stream) override {
    streams::Summary summary;
    streams::Item item;
    while (true) {
      auto [ec] = co_await stream.async_read(item, asio::as_tuple(asio::use_awaitable));
      if (is_end_of_stream(ec)) co_return;
      if (ec) throw boost::system::system_error(ec);
      summary.set_count(summary.count() + 1);
      co_await stream.async_write(summary, asio::use_awaitable);
    }
  }
};

// The client end: whatever the server answers is dropped at once.
struct sink final : transport::connection_handler {
  void on_message(transport::received_message message) override { message.release(); }
  void on_close(const boost::system::error_code&) override {}
};

// Bounds the work of one input: a stream the fuzzer keeps granting could otherwise run forever.
constexpr std::size_t kMaxHandlersPerInput = 20000;
constexpr std::size_t kMaxHandlersPerMessage = 2000;

// Runs ready handlers until none is left or the budget is spent. An io_context that ran out of
// work stops, and a stopped one runs nothing more until restarted (later posts still count).
std::size_t run_until_idle(asio::io_context& io, std::size_t budget) {
  if (io.stopped()) io.restart();
  std::size_t n = 0;
  while (n < budget && io.poll_one() > 0) ++n;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::input in(data, size);
  const auto flags = in.take<std::uint8_t>();

  asio::io_context io{1};
  test::test_service service;
  service.max_made_up_bytes = 64 * 1024;  // replies it makes up from a size field
  events generated;
  server_options options;
  if ((flags & 1) != 0) {  // small limits, so inputs reach them
    options.max_in_flight_per_connection = 4;
    options.max_metadata_entries = 2;
    options.max_metadata_bytes = 64;
    options.stream_window = kInitialStreamWindow;
    options.transport.max_message_size = 4096;
  }
  std::optional<server> srv(std::in_place, io.get_executor(), options);
  srv->add_service(service);
  srv->add_service(generated);

  transport::loopback::loopback_options link;
  link.connection = options.transport;
  auto [client, server_end] =
      transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor(), link);
  srv->serve(server_end);
  server_end.reset();
  client->start(std::make_shared<sink>());

  std::size_t budget = kMaxHandlersPerInput;
  while (!in.empty() && budget > 0 && client->is_open()) {
    const auto bytes = in.take_bytes(in.take<std::uint16_t>());
    // A message the loopback refuses (too large, no room) is skipped, as a sender would have to.
    (void)client->send_copy(asio::buffer(bytes.data(), bytes.size()));
    budget -= run_until_idle(io, std::min(budget, kMaxHandlersPerMessage));
  }

  if ((flags & 4) != 0) {
    srv->async_shutdown(std::chrono::milliseconds(0), [] {});
    run_until_idle(io, kMaxHandlersPerInput);
  }
  if ((flags & 2) != 0) {
    client->close();
  }
  client.reset();  // without close(): the server sees connection_lost
  run_until_idle(io, kMaxHandlersPerInput);
  srv.reset();
  run_until_idle(io, kMaxHandlersPerInput);
  // Nothing may be left waiting: the io_context ran out of work (poll stops it then). A timer or
  // an operation still pending here would be a hang (or a leak) in a real server.
  RDMARPC_FUZZ_CHECK(io.stopped());
  return 0;
}
