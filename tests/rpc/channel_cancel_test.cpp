// The channel's cancel frame under send back-pressure: a call cancelled while the connection has
// no send room still tells the server, once room comes back. Raw loopback server end (records
// frames), whose incoming messages are held up by the loopback's delay fault. One io_context on
// the test thread; every wait is bounded.
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>

#include "rpc/channel.hpp"
#include "rpc/frame.hpp"
#include "rpc/unary_call.hpp"
#include "rpc_test.pb.h"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"  // run_until, run_ready, recording_handler
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;

TEST_CASE("channel: a call cancelled without send room still tells the server once room is back",
          "[channel][backpressure]") {
  boost::asio::io_context io(1);
  transport::loopback::loopback_options lo;
  lo.connection.send_queue_bytes = 1;  // one message at a time: the request holds all the room
  lo.a_to_b.delay_at = 1;              // a is the client's end: its first message, and all behind it,
  lo.a_to_b.delay = std::chrono::milliseconds(200);  // wait while the call is cancelled
  auto [client_end, server_end] =
      transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor(), lo);
  auto server = std::make_shared<test::recording_handler>();
  server_end->start(server);
  auto ch = channel::create(client_end);

  boost::asio::cancellation_signal cancel;
  std::optional<boost::system::error_code> outcome;
  test::EchoRequest request;
  request.set_data("to be cancelled");
  async_unary_call<test::EchoReply>(
      *ch, test::test_service::echo, nullptr, request,
      boost::asio::bind_cancellation_slot(
          cancel.slot(), [&](boost::system::error_code ec, test::EchoReply) { outcome = ec; }));
  test::run_ready(io);  // the call is committed; its message waits out the delay, holding the room
  REQUIRE_FALSE(outcome.has_value());
  cancel.emit(boost::asio::cancellation_type::terminal);
  REQUIRE(test::run_until(io, [&] { return outcome.has_value(); }));
  CHECK(*outcome == make_error_code(status_code::cancelled));

  // The request, then the cancel frame for the same call, once the delay freed the room.
  REQUIRE(test::run_until(
      io, [&] { return server->messages.size() == 2; }, std::chrono::seconds(10)));
  frame::decode_error err{};
  const auto first = frame::decode(server->messages[0], err);
  REQUIRE(err == frame::decode_error::none);
  CHECK(first.header.kind == frame::kind::request);
  const auto second = frame::decode(server->messages[1], err);
  REQUIRE(err == frame::decode_error::none);
  CHECK(second.header.kind == frame::kind::cancel);
  CHECK(second.header.call_id == first.header.call_id);

  ch.reset();
  server_end->close();
  io.restart();
  io.run_for(std::chrono::seconds(10));
}
