// What a server does with a client that breaks the stream rules (docs/wire-format.md, Streams),
// driven frame by frame from a raw loopback connection: a message beyond the window, after the
// half-close, a window grant beyond the window → that stream is reset INTERNAL and the connection
// and its other calls carry on; a frame for a stream never opened → the connection is closed as a
// protocol violation while other clients carry on; a frame for a stream that ended → ignored.
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <vector>

#include "raw_frames.hpp"
#include "rpc/channel.hpp"
#include "rpc/extras.hpp"
#include "rpc/frame.hpp"
#include "rpc/server.hpp"
#include "rpc/unary_call.hpp"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;

namespace {

// A client that writes frames by hand and records what the server sends back.
struct raw_client {
  boost::asio::io_context& io;
  std::shared_ptr<transport::connection> conn;
  std::shared_ptr<test::recording_handler> seen = std::make_shared<test::recording_handler>();

  void send(const frame::header& h, std::string_view ex = {}, std::string_view payload = {}) {
    REQUIRE_FALSE(conn->send_copy(boost::asio::buffer(test::encode_frame(h, ex, payload))));
  }
  void open(std::uint32_t id, const method_descriptor& m, stream_window_size window) {
    frame::header h;
    h.kind = frame::kind::stream_open;
    h.call_id = id;
    h.method_id = m.id;
    send(h, extras::encode_request({}, &window));
  }
  void message(std::uint32_t id, const google::protobuf::MessageLite& msg) {
    frame::header h;
    h.kind = frame::kind::stream_message;
    h.call_id = id;
    send(h, {}, msg.SerializeAsString());
  }
  void bare(frame::kind k, std::uint32_t id, std::uint32_t method = 0, std::uint64_t timeout = 0) {
    frame::header h;
    h.kind = k;
    h.call_id = id;
    h.method_id = method;
    h.timeout_us = timeout;
    send(h);
  }
  void echo(std::uint32_t id) {
    test::EchoRequest req;
    req.set_data("ping");
    frame::header h;
    h.kind = frame::kind::request;
    h.call_id = id;
    h.method_id = test::test_service::echo.id;
    send(h, {}, req.SerializeAsString());
  }
  // The first frame of `kind` for `id` the server sent, waiting for it (bounded).
  std::optional<frame::header> wait_for(frame::kind kind, std::uint32_t id) {
    std::optional<frame::header> found;
    test::run_until(io, [&] {
      found = test::find_frame(seen->messages, kind, id);
      return found.has_value() || seen->close_calls > 0;
    });
    return found;
  }
};

struct fixture {
  boost::asio::io_context io{1};
  test::test_service service;
  std::optional<server> srv;

  fixture() {
    server_options options;
    options.stream_window = kInitialStreamWindow;  // 16 messages per stream
    srv.emplace(io.get_executor(), options);
    srv->add_service(service);
  }
  ~fixture() {
    srv.reset();
    io.restart();
    io.run_for(std::chrono::seconds(10));
  }
  raw_client raw() {
    auto [client_end, server_end] =
        transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
    srv->serve(server_end);
    raw_client c{io, client_end};
    client_end->start(c.seen);
    return c;
  }
  status_code echo_on_channel() {
    auto [client_end, server_end] =
        transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
    srv->serve(server_end);
    auto ch = channel::create(client_end);
    std::optional<boost::system::error_code> out;
    test::EchoRequest req;
    req.set_data("x");
    async_unary_call<test::EchoReply>(*ch, test::test_service::echo, nullptr, req,
                                      [&](boost::system::error_code ec, test::EchoReply) { out = ec; });
    REQUIRE(test::run_until(io, [&] { return out.has_value(); }));
    return to_status_code(*out);
  }
};

// Opens Ticks (forever, 1-byte messages) with a one-message window the client never grants back:
// the handler writes one message, then waits; it never reads past its request.
void open_stalled_ticks(raw_client& c, std::uint32_t id) {
  c.open(id, test::test_service::ticks, {1024, 1});
  test::StreamRequest req;
  req.set_forever(true);
  req.set_size(1);
  c.message(id, req);
  REQUIRE(c.wait_for(frame::kind::stream_message, id));
}

}  // namespace

TEST_CASE("stream violation: a message beyond the window resets that stream only", "[stream][violation]") {
  fixture f;
  auto c = f.raw();
  open_stalled_ticks(c, 1);
  // The server's window is 16 messages (kInitialStreamWindow); the request took one.
  test::EchoRequest filler;
  for (std::uint32_t i = 0; i < kInitialStreamWindow.messages + 8; ++i) c.message(1, filler);
  const auto reset = c.wait_for(frame::kind::reset, 1);
  REQUIRE(reset);
  CHECK(reset->status == status_code::internal);
  CHECK(f.service.wait_for([&] { return f.service.streams_cancelled.load() == 1; }));
  // The connection carries on: a frame for the ended stream is ignored, a call is answered.
  c.message(1, filler);
  c.echo(2);
  const auto resp = c.wait_for(frame::kind::response, 2);
  REQUIRE(resp);
  CHECK(resp->status == status_code::ok);
  CHECK(c.seen->close_calls == 0);
}

TEST_CASE("stream violation: a message after the half-close resets that stream", "[stream][violation]") {
  fixture f;
  auto c = f.raw();
  open_stalled_ticks(c, 1);
  c.bare(frame::kind::half_close, 1);
  test::EchoRequest late;
  c.message(1, late);
  const auto reset = c.wait_for(frame::kind::reset, 1);
  REQUIRE(reset);
  CHECK(reset->status == status_code::internal);
  c.echo(3);
  REQUIRE(c.wait_for(frame::kind::response, 3));
  CHECK(c.seen->close_calls == 0);
}

TEST_CASE("stream violation: a second half-close and a grant beyond the window reset the stream",
          "[stream][violation]") {
  fixture f;
  auto c = f.raw();
  open_stalled_ticks(c, 1);
  c.bare(frame::kind::half_close, 1);
  c.bare(frame::kind::half_close, 1);
  auto reset = c.wait_for(frame::kind::reset, 1);
  REQUIRE(reset);
  CHECK(reset->status == status_code::internal);

  open_stalled_ticks(c, 5);
  // We announced a window of 1 message: granting 5 back is more than the server ever spent.
  c.bare(frame::kind::window_update, 5, /*messages=*/5, /*bytes=*/0);
  reset = c.wait_for(frame::kind::reset, 5);
  REQUIRE(reset);
  CHECK(reset->status == status_code::internal);
  CHECK(c.seen->close_calls == 0);
}

TEST_CASE("stream violation: a frame for a stream never opened closes that connection only",
          "[stream][violation]") {
  fixture f;
  auto c = f.raw();
  c.echo(1);
  REQUIRE(c.wait_for(frame::kind::response, 1));
  test::EchoRequest msg;
  c.message(1000, msg);  // above every id this client used
  REQUIRE(test::run_until(f.io, [&] { return c.seen->close_calls > 0; }));
  CHECK(f.echo_on_channel() == status_code::ok);
}

TEST_CASE("stream violation: trailers or stream_headers from a client reset that stream",
          "[stream][violation]") {
  fixture f;
  auto c = f.raw();
  open_stalled_ticks(c, 1);
  c.bare(frame::kind::trailers, 1);
  auto reset = c.wait_for(frame::kind::reset, 1);
  REQUIRE(reset);
  CHECK(reset->status == status_code::internal);
  open_stalled_ticks(c, 2);
  c.bare(frame::kind::stream_headers, 2, 4, 4096);
  reset = c.wait_for(frame::kind::reset, 2);
  REQUIRE(reset);
  CHECK(reset->status == status_code::internal);
  CHECK(c.seen->close_calls == 0);
}
