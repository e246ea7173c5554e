// connection_heartbeats driven by hand over a loopback pair: what a tick sends through the connection
// and decides, what a pong, stop() and a disabled configuration change, and (subscribed to the
// io_context's ticker) the grid's domain in a ping and sharing by the peer's. The timing rules
// themselves are liveness_test's; end to end, heartbeat_test's.
#include "rpc/connection_heartbeats.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <span>

#include "rpc/frame.hpp"
#include "tests/transport/connection_contract.hpp"
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;
using namespace std::chrono_literals;
using tick_result = connection_heartbeats::tick_result;
using clock_type = connection_heartbeats::clock;

namespace {

// Two started loopback ends on one io_context; what `ours` sends lands in `received`.
struct pair_fixture {
  boost::asio::io_context io{1};
  std::shared_ptr<transport::connection> ours, theirs;
  std::shared_ptr<test::recording_handler> received = std::make_shared<test::recording_handler>();

  pair_fixture() {
    std::tie(ours, theirs) = transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
    ours->start(std::make_shared<test::recording_handler>());
    theirs->start(received);
  }
  ~pair_fixture() {
    ours->close();
    theirs->close();
    io.restart();
    io.run_for(1s);  // the ends' teardown (bounded; returns once out of work)
  }

  frame::view frame_received(std::size_t index) {
    frame::decode_error err{};
    const auto v = frame::decode(std::span<const std::byte>(received->messages.at(index)), err);
    REQUIRE(err == frame::decode_error::none);
    return v;
  }
};

}  // namespace

TEST_CASE(
    "connection_heartbeats: a due tick sends its ping through the connection, and no answer means a dead "
    "peer",
    "[heartbeat]") {
  pair_fixture p;
  connection_heartbeats hb(500ms, 300ms);
  REQUIRE(hb.enabled());
  const auto t0 = clock_type::now();  // after the liveness was made: a silence of at least t - t0
  CHECK(hb.tick(t0 + 100ms, t0 + 100ms, false, *p.ours) == tick_result::none);
  REQUIRE(hb.tick(t0 + 500ms, t0 + 500ms, false, *p.ours) == tick_result::ping_sent);
  REQUIRE(test::run_until(p.io, [&] { return p.received->messages.size() == 1; }));
  const auto ping = p.frame_received(0);
  CHECK(ping.header.kind == frame::kind::ping);
  CHECK(ping.header.timeout_us == hb.state().ping_value());  // the value a pong must echo
  // Outstanding: no second ping before the timeout, then the verdict.
  CHECK(hb.tick(t0 + 600ms, t0 + 600ms, false, *p.ours) == tick_result::none);
  CHECK(hb.tick(t0 + 2s, t0 + 2s, false, *p.ours) == tick_result::peer_dead);
  p.io.restart();
  p.io.poll();
  CHECK(p.received->messages.size() == 1);
}

TEST_CASE("connection_heartbeats: a pong echoing the ping keeps the peer alive", "[heartbeat]") {
  pair_fixture p;
  connection_heartbeats hb(500ms, 300ms);
  const auto t0 = clock_type::now();
  REQUIRE(hb.tick(t0 + 500ms, t0 + 500ms, false, *p.ours) == tick_result::ping_sent);
  const auto pong_bytes = frame::encode_heartbeat(frame::kind::pong, hb.state().ping_value(), 0);
  frame::decode_error err{};
  const auto pong = frame::decode(std::span<const std::byte>(pong_bytes), err);
  REQUIRE(err == frame::decode_error::none);
  hb.on_pong(pong);
  // Past the ping's timeout (dead at 800 ms unanswered): answered, so nothing to decide.
  CHECK(hb.tick(t0 + 900ms, t0 + 900ms, false, *p.ours) == tick_result::none);
}

TEST_CASE("connection_heartbeats: disabled, ticks send nothing and decide nothing", "[heartbeat]") {
  pair_fixture p;
  connection_heartbeats hb(clock_type::duration::zero(), 300ms);
  CHECK_FALSE(hb.enabled());
  const auto t0 = clock_type::now();
  CHECK(hb.tick(t0 + 1h, t0 + 1h, true, *p.ours) == tick_result::none);
  bool asked = false;
  hb.heard(t0 + 1h, *p.ours, [&] { return asked = true; });
  CHECK_FALSE(asked);  // nothing to time: whether the connection is in use is not worked out
  p.io.restart();
  p.io.poll();
  CHECK(p.received->messages.empty());
}

TEST_CASE("connection_heartbeats: stop() forgets the old connection's ping", "[heartbeat]") {
  pair_fixture p;
  connection_heartbeats hb(500ms, 300ms);
  const auto t0 = clock_type::now();
  REQUIRE(hb.tick(t0 + 500ms, t0 + 500ms, false, *p.ours) == tick_result::ping_sent);
  hb.stop();
  // Unstopped, this tick would be the dead verdict (see above); the fresh liveness pings instead.
  CHECK(hb.tick(t0 + 2s, t0 + 2s, false, *p.ours) == tick_result::ping_sent);
}

TEST_CASE("connection_heartbeats: started, its pings name the grid and a peer's grid shares the liveness",
          "[heartbeat]") {
  pair_fixture p;
  connection_heartbeats hb(500ms, 300ms);
  int ticker_calls = 0;  // the real ticker's (a grid instant may come while the test runs)
  hb.start(p.io.get_executor(), {}, [&](clock_type::time_point, clock_type::time_point) { ++ticker_calls; });
  const auto t0 = clock_type::now();  // start() made the liveness
  REQUIRE(hb.tick(t0 + 500ms, t0 + 500ms, false, *p.ours) == tick_result::ping_sent);
  REQUIRE(test::run_until(p.io, [&] { return p.received->messages.size() == 1; }));
  const auto ping = p.frame_received(0);
  CHECK(frame::heartbeat_domain(ping) != 0);  // this executor's grid, for the peer to share by

  bool asked = false;
  hb.heard(clock_type::now(), *p.ours, [&] { return asked = true; });
  CHECK(asked);

  CHECK_FALSE(hb.state().shared());
  const auto pong_bytes = frame::encode_heartbeat(frame::kind::pong, hb.state().ping_value(), 42);
  frame::decode_error err{};
  const auto pong = frame::decode(std::span<const std::byte>(pong_bytes), err);
  REQUIRE(err == frame::decode_error::none);
  hb.share_with(pong);
  CHECK(
      hb.state().shared());  // the first connection to grid 42 on this executor: its state is the shared one
  hb.stop();
  CHECK_FALSE(hb.state().shared());
}
