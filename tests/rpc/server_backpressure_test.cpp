// The server's replies under send back-pressure, against a raw loopback client whose incoming
// messages are held up by the loopback's delay fault (deterministic: nothing moves towards the
// client until the delay ends). One io_context on the test thread; every wait is bounded.
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <vector>

#include "rpc/frame.hpp"
#include "rpc/server.hpp"
#include "rpc_test.pb.h"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"  // run_until, recording_handler
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;

namespace {

std::vector<std::byte> echo_request_frame(std::uint32_t call_id) {
  test::EchoRequest req;
  req.set_data("call " + std::to_string(call_id));
  const std::string payload = req.SerializeAsString();
  frame::header h;
  h.kind = frame::kind::request;
  h.call_id = call_id;
  h.method_id = test::test_service::echo.id;
  h.payload_length = static_cast<std::uint32_t>(payload.size());
  std::vector<std::byte> out(frame::header_size(h) + payload.size());
  const std::size_t head = frame::encode_header(h, out);
  std::memcpy(out.data() + head, payload.data(), payload.size());
  return out;
}

struct outcome {
  int ok = 0;
  int resource_exhausted = 0;
  int closes = 0;
};

// Sends `requests` echo calls at once to a server allowing 2 in flight per connection, whose
// messages to the client are delayed (so its send room runs out), and reads what comes back.
outcome run(std::uint32_t requests) {
  boost::asio::io_context io(1);
  test::test_service service;
  server_options options;
  options.max_in_flight_per_connection = 2;
  server srv(io.get_executor(), options);
  srv.add_service(service);
  transport::loopback::loopback_options lo;
  lo.connection.send_queue_bytes = 1;  // one message at a time waits to go to the client
  lo.b_to_a.delay_at = 1;              // b is the server's end: its first message, and all behind it,
  lo.b_to_a.delay = std::chrono::milliseconds(300);  // wait while every request is handled
  auto [client, server_end] =
      transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor(), lo);
  srv.serve(server_end);
  auto rec = std::make_shared<test::recording_handler>();
  client->start(rec);
  for (std::uint32_t id = 1; id <= requests; ++id)
    REQUIRE_FALSE(test::send_bytes(*client, echo_request_frame(id)));
  outcome out;
  test::run_until(
      io, [&] { return rec->messages.size() == requests || rec->close_calls > 0; }, std::chrono::seconds(30));
  for (const auto& m : rec->messages) {
    frame::decode_error err{};
    const auto v = frame::decode(m, err);
    REQUIRE(err == frame::decode_error::none);
    if (v.header.status == status_code::ok) ++out.ok;
    if (v.header.status == status_code::resource_exhausted) ++out.resource_exhausted;
  }
  out.closes = rec->close_calls;
  client->close();
  test::run_until(io, [&] { return rec->close_calls > 0; });
  // Let the server's end hear of it too, so no connection is left holding its handler.
  io.restart();
  io.run_for(std::chrono::seconds(10));
  return out;
}

}  // namespace

TEST_CASE("server: refusals without send room wait their turn - a client that reads is not cut off",
          "[server][backpressure]") {
  // Echo answers at once (its coroutine never suspends, so it ends inside the request's delivery):
  // call 1's reply takes the send room; calls 2 and 3 end with their replies waiting for room,
  // still in flight (2); 4 and 5 are refused, and their refusals wait behind those replies.
  const outcome out = run(5);
  CHECK(out.closes == 0);
  CHECK(out.ok == 3);
  CHECK(out.resource_exhausted == 2);
}

TEST_CASE("server: a peer that lets more refusals wait than max_in_flight_per_connection is cut off",
          "[server][backpressure]") {
  // The 6th request finds two refusals waiting (4 and 5, behind two waiting replies): the bound
  // of 2 is reached.
  const outcome out = run(6);
  CHECK(out.closes == 1);
}
