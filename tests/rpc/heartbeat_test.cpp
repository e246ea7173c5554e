// Heartbeats end to end on the host, over loopback and tcp (docs/wire-format.md, Heartbeats):
// a hung server (its only io thread blocked) is detected on an idle connection and under a call
// with no deadline; a healthy idle connection stays up while pings are answered; replies flowing
// cost no pings; a client pinging faster than the server allows is cut off (too_many_pings) while
// another carries on; the server detects a silent client; ping frames are answered and malformed
// ones close the connection; a tcp connection busy with one long message, either way, is not
// taken for a silent one. Intervals are small; every wait is bounded and nothing asserts time.
#include <poll.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "e2e_harness.hpp"
#include "raw_frames.hpp"
#include "rpc/channel.hpp"
#include "rpc/frame.hpp"
#include "rpc/server.hpp"
#include "rpc/stream.hpp"
#include "rpc/unary_call.hpp"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"
#include "tests/transport/raw_tcp.hpp"
#include "transport/endpoint.hpp"
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;
using namespace std::chrono_literals;
using test::run_until;

namespace {

// The client runs on the test thread's io_context (run_until); the server on its own io thread,
// which a test may block to play a hung host.
struct hb_fixture {
  std::string target;
  boost::asio::io_context io{1};
  test::test_service service;
  std::optional<test::io_thread> server_io;
  std::unique_ptr<server> srv;
  std::string uri;

  hb_fixture(std::string t, const server_options& options) : target(std::move(t)) {
    server_io.emplace();
    srv = std::make_unique<server>(server_io->executor(), options);
    srv->add_service(service);
    if (target == "tcp") uri = srv->listen("tcp://127.0.0.1:0").to_uri();
  }
  ~hb_fixture() {
    srv.reset();
    io.restart();
    io.run_for(5s);  // returns once the channels' teardown is done (out of work)
    CHECK(server_io->drain());
  }

  std::shared_ptr<channel> make_channel(const channel_options& options) {
    if (target == "tcp") return channel::create(io.get_executor(), uri, options);
    auto [client_end, server_end] =
        transport::loopback::make_loopback_pair(io.get_executor(), server_io->executor());
    srv->serve(server_end);
    return channel::create(client_end, options);
  }

  // Starts an echo (or a sleep of `sleep_ms`) call; `out` is set when it completes.
  void start(channel& ch, std::optional<boost::system::error_code>& out, client_context* ctx = nullptr,
             std::uint32_t sleep_ms = 0) {
    const auto req = test::make_request("hb", sleep_ms);
    async_unary_call<test::EchoReply>(ch, sleep_ms > 0 ? test::test_service::sleep : test::test_service::echo,
                                      ctx, req,
                                      [&out](boost::system::error_code ec, test::EchoReply) { out = ec; });
  }
  status_code call(channel& ch, client_context* ctx = nullptr) {
    std::optional<boost::system::error_code> out;
    start(ch, out, ctx);
    REQUIRE(run_until(io, [&] { return out.has_value(); }));
    return to_status_code(*out);
  }
};

// Blocks an io thread until opened (or destroyed): a hung host whose kernel still holds the socket.
class hang {
 public:
  explicit hang(const boost::asio::any_io_executor& ex) {
    boost::asio::post(ex, [f = gate_.get_future().share()] { f.wait(); });
  }
  ~hang() { open(); }
  void open() {
    if (!open_) gate_.set_value();
    open_ = true;
  }

 private:
  std::promise<void> gate_;
  bool open_ = false;
};

channel_options fast_client(std::chrono::milliseconds interval, std::chrono::milliseconds timeout) {
  channel_options o;
  o.heartbeat_interval = interval;
  o.heartbeat_timeout = timeout;
  return o;
}

server_options quiet_server() {
  server_options o;
  o.heartbeat_interval = 0ms;  // only the client's heartbeats in these tests
  o.min_ping_interval_allowed = 0ms;
  return o;
}

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("heartbeat: a call with no deadline to a hung server fails UNAVAILABLE (connection lost)",
          "[heartbeat]") {
  const auto target = GENERATE(as<std::string>{}, "loopback", "tcp");
  hb_fixture f(target, quiet_server());
  auto ch = f.make_channel(fast_client(20ms, 500ms));
  REQUIRE(f.call(*ch) == status_code::ok);
  hang h(f.server_io->executor());
  client_context ctx;  // no deadline
  std::optional<boost::system::error_code> out;
  f.start(*ch, out, &ctx);
  REQUIRE(run_until(f.io, [&] { return out.has_value(); }));
  CHECK(to_status_code(*out) == status_code::unavailable);
  CHECK(contains(ctx.status_message(), "connection lost"));
  const auto s = ch->stats();
  CHECK(s.heartbeat_timeouts == 1);
  CHECK(s.pings_sent >= 1);
  h.open();
}

TEST_CASE("heartbeat: a bidi stream open to a hung server ends UNAVAILABLE (connection lost)",
          "[heartbeat][stream]") {
  const auto target = GENERATE(as<std::string>{}, "loopback", "tcp");
  hb_fixture f(target, quiet_server());
  auto ch = f.make_channel(fast_client(20ms, 500ms));
  REQUIRE(f.call(*ch) == status_code::ok);
  // One echo through the stream, then the server hangs while the client waits for the next
  // message: no deadline, no close, only heartbeats can end the wait.
  constexpr auto as_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
  std::optional<hang> h;
  client_context ctx;
  std::optional<boost::system::error_code> first_read, second_read, finished;
  boost::asio::co_spawn(
      f.io,
      [&]() -> boost::asio::awaitable<void> {
        client_stream<test::EchoRequest, test::EchoReply> s(
            ch->start_stream(test::test_service::chat, &ctx, nullptr));
        test::EchoRequest req;
        req.set_data("before");
        test::EchoReply reply;
        (void)co_await s.async_write(req, as_tuple);
        first_read = std::get<0>(co_await s.async_read(reply, as_tuple));
        h.emplace(f.server_io->executor());
        second_read = std::get<0>(co_await s.async_read(reply, as_tuple));
        finished = std::get<0>(co_await s.async_finish(as_tuple));
      },
      boost::asio::detached);
  REQUIRE(run_until(f.io, [&] { return finished.has_value(); }));
  CHECK(!*first_read);
  CHECK(*second_read);  // the stream broke: no message, no clean end
  CHECK(to_status_code(*finished) == status_code::unavailable);
  CHECK(contains(ctx.status_message(), "connection lost"));
  CHECK(ch->stats().heartbeat_timeouts == 1);
  h->open();
}

TEST_CASE("heartbeat: an idle connection to a hung server is closed", "[heartbeat]") {
  const auto target = GENERATE(as<std::string>{}, "loopback", "tcp");
  hb_fixture f(target, quiet_server());
  auto ch = f.make_channel(fast_client(20ms, 500ms));
  REQUIRE(f.call(*ch) == status_code::ok);
  {
    hang h(f.server_io->executor());
    REQUIRE(run_until(f.io, [&] { return ch->stats().heartbeat_timeouts == 1; }));
  }
  // The server woke up. The endpoint failed, so a fail-fast call fails at once during its backoff,
  // while a wait_for_ready call gets the next connection (tcp; a loopback channel cannot reconnect).
  client_context ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_timeout(10s);
  if (target == "tcp") {
    CHECK(ch->state() == channel_state::transient_failure);
    CHECK(f.call(*ch) == status_code::unavailable);
    CHECK(f.call(*ch, &ctx) == status_code::ok);
    CHECK(ch->state() == channel_state::ready);
    CHECK(ch->stats().connects == 2);
  } else {
    CHECK(ch->state() == channel_state::shutdown);
    CHECK(f.call(*ch, &ctx) == status_code::unavailable);
  }
}

TEST_CASE("heartbeat: a healthy idle connection stays up and every ping is answered", "[heartbeat]") {
  const auto target = GENERATE(as<std::string>{}, "loopback", "tcp");
  server_options so;
  so.heartbeat_interval = 20ms;
  so.heartbeat_timeout = 2s;  // generous: a loaded machine (sanitizers) must not look dead
  so.min_ping_interval_allowed = 10ms;
  hb_fixture f(target, so);
  auto ch = f.make_channel(fast_client(20ms, 2s));
  REQUIRE(f.call(*ch) == status_code::ok);
  // Many intervals of silence: both sides run heartbeats, one ping answers for both.
  REQUIRE(run_until(f.io, [&] {
    const auto s = ch->stats();
    return s.pings_sent + s.pings_received >= 30;
  }));
  const auto c = ch->stats();
  const auto s = f.srv->stats();
  CHECK(c.heartbeat_timeouts == 0);
  CHECK(s.heartbeat_timeouts == 0);
  CHECK(c.too_many_pings == 0);
  CHECK(s.too_many_pings == 0);
  CHECK(c.pongs_received + 1 >= c.pings_sent);  // at most the last one still on its way
  // The server counts a ping once the transport took it, on its own thread: the client may
  // already have received (and counted) that one. One at most: a ping waits for its pong.
  CHECK(c.pings_received <= s.pings_sent + 1);
  CHECK(s.pings_received <= c.pings_sent);
  // Still the first connection.
  CHECK(f.call(*ch) == status_code::ok);
  CHECK(ch->stats().connects == 1);
}

TEST_CASE("heartbeat: a server whose client pings sends no pings of its own", "[heartbeat]") {
  const auto target = GENERATE(as<std::string>{}, "loopback", "tcp");
  server_options so;
  so.heartbeat_interval = 20ms;  // the server would ping as often as the client without deferring
  so.heartbeat_timeout = 2s;
  so.min_ping_interval_allowed = 10ms;
  hb_fixture f(target, so);
  auto ch = f.make_channel(fast_client(20ms, 2s));
  REQUIRE(f.call(*ch) == status_code::ok);
  // Until the client's first ping arrives the server may ping once or twice; after that, never
  // (its silence allowance is interval + timeout + a tick = 2.04 s, the client pings every ~40 ms).
  REQUIRE(run_until(f.io, [&] { return f.srv->stats().pings_received >= 2; }));
  const auto server_pings = f.srv->stats().pings_sent;
  REQUIRE(run_until(f.io, [&] { return f.srv->stats().pings_received >= 22; }));
  CHECK(f.srv->stats().pings_sent == server_pings);
  CHECK(f.srv->stats().heartbeat_timeouts == 0);
  CHECK(ch->stats().heartbeat_timeouts == 0);
}

namespace {

server_options pinging_server() {
  server_options so;
  so.heartbeat_interval = 20ms;
  so.heartbeat_timeout = 2s;  // generous: a loaded machine (sanitizers) must not look dead
  so.min_ping_interval_allowed = 10ms;
  return so;
}

// Heartbeat exchanges a channel took part in: its own pings, and the server's it answered.
std::uint64_t exchanges(channel& ch) {
  const auto s = ch.stats();
  return s.pings_sent + s.pings_received;
}

// Connects `n` channels and waits until each has had a heartbeat exchange of its own, which names
// both ends' heartbeat domains: from then on the channels share one liveness, as do the server's
// connections to them.
std::vector<std::shared_ptr<channel>> connect_sharing(hb_fixture& f, std::size_t n,
                                                      const channel_options& o) {
  std::vector<std::shared_ptr<channel>> channels;
  for (std::size_t i = 0; i < n; ++i) {
    channels.push_back(f.make_channel(o));
    REQUIRE(f.call(*channels.back()) == status_code::ok);
  }
  REQUIRE(run_until(f.io, [&] {
    for (const auto& ch : channels) {
      if (exchanges(*ch) == 0) return false;
    }
    return true;
  }));
  return channels;
}

}  // namespace

TEST_CASE("heartbeat: idle connections between two processes share one ping per period", "[heartbeat]") {
  const auto target = GENERATE(as<std::string>{}, "loopback", "tcp");
  hb_fixture f(target, pinging_server());
  const auto channels = connect_sharing(f, 4, fast_client(20ms, 2s));
  const auto total = [&] {
    std::uint64_t n = 0;
    for (const auto& ch : channels) n += exchanges(*ch);
    return n;
  };
  std::vector<channel_stats> before;
  for (const auto& ch : channels) before.push_back(ch->stats());
  const auto total_before = total();
  REQUIRE(run_until(f.io, [&] { return total() >= total_before + 20; }));
  // Twenty exchanges later: each side's pings went through two of the four connections at most
  // (the first two to tick, peer_liveness::kCarriers), never through all of them. Usually the
  // client pings and the server, hearing it, sends none; but a side that runs late (a stalled
  // process) is pinged by the other, whose carriers need not be the same two connections.
  std::size_t pinged_through = 0, pinged_by_server_through = 0;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const auto now = channels[i]->stats();
    pinged_through += now.pings_sent > before[i].pings_sent ? 1 : 0;
    pinged_by_server_through += now.pings_received > before[i].pings_received ? 1 : 0;
    CHECK(now.heartbeat_timeouts == 0);
    CHECK(now.connects == 1);
  }
  CHECK(pinged_through <= 2);
  CHECK(pinged_by_server_through <= 2);
  // Twenty exchanges take ten ping instants at least, each through both carriers of the side that
  // pinged: one side used two connections.
  CHECK(std::max(pinged_through, pinged_by_server_through) == 2);
  CHECK(f.srv->stats().heartbeat_timeouts == 0);
  for (const auto& ch : channels) CHECK(f.call(*ch) == status_code::ok);
}

TEST_CASE("heartbeat: a hung server ends every idle connection that shares its heartbeats", "[heartbeat]") {
  const auto target = GENERATE(as<std::string>{}, "loopback", "tcp");
  hb_fixture f(target, pinging_server());
  const auto channels = connect_sharing(f, 4, fast_client(20ms, 500ms));
  {
    hang h(f.server_io->executor());
    REQUIRE(run_until(f.io, [&] {
      for (const auto& ch : channels) {
        if (ch->stats().heartbeat_timeouts == 0) return false;
      }
      return true;
    }));
  }
  for (const auto& ch : channels) {
    CHECK(ch->stats().heartbeat_timeouts == 1);
    CHECK(ch->state() != channel_state::ready);
  }
}

namespace {

// A loopback channel to f's server whose server-to-client direction goes silent after the first
// message (a path that failed while others to the same server work, as one ECMP route can). That
// first message is a heartbeat frame (no call is made before), so the channel shares first.
std::shared_ptr<channel> make_path_failing_channel(hb_fixture& f, const channel_options& o) {
  transport::loopback::loopback_options lo;
  lo.b_to_a.delay_at = 2;
  lo.b_to_a.delay = std::chrono::hours(1);
  auto [client_end, server_end] =
      transport::loopback::make_loopback_pair(f.io.get_executor(), f.server_io->executor(), lo);
  f.srv->serve(server_end);
  auto ch = channel::create(client_end, o);
  REQUIRE(run_until(f.io, [&] {
    const auto s = ch->stats();
    return s.pings_received + s.pongs_received > 0;  // it heard a heartbeat frame: it shares
  }));
  return ch;
}

}  // namespace

TEST_CASE("heartbeat: a shared connection whose own path goes silent under a call is detected",
          "[heartbeat]") {
  // Three channels to one server share their heartbeats; the third's path fails. It is not one
  // of the two that carry the shared pings, and its call has no deadline: once in use, its
  // connection must check its own path.
  // A 500 ms timeout: the healthy ones must not look dead on a loaded machine (sanitizers).
  hb_fixture f("loopback", pinging_server());
  const auto healthy = connect_sharing(f, 2, fast_client(20ms, 500ms));
  auto failing = make_path_failing_channel(f, fast_client(20ms, 500ms));
  client_context ctx;  // no deadline
  std::optional<boost::system::error_code> out;
  f.start(*failing, out, &ctx, /*sleep_ms=*/30000);
  REQUIRE(run_until(f.io, [&] { return out.has_value(); }));
  CHECK(to_status_code(*out) == status_code::unavailable);
  CHECK(contains(ctx.status_message(), "no heartbeat answer"));
  CHECK(failing->stats().heartbeat_timeouts == 1);
  // The others, whose paths work, carry on.
  for (const auto& ch : healthy) {
    CHECK(ch->stats().heartbeat_timeouts == 0);
    CHECK(f.call(*ch) == status_code::ok);
    CHECK(ch->stats().connects == 1);
  }
  CHECK(f.service.wait_for([&] { return f.service.sleeps_cancelled.load() == 1; }));
}

TEST_CASE("heartbeat: a carrier of the shared ping whose own path goes silent ends alone", "[heartbeat]") {
  // The first and second channels carry the shared pings; the second one's path fails. The first
  // one's pongs keep the shared state alive, so only the second ends, and the third, idle, stays.
  hb_fixture f("loopback", pinging_server());
  const auto first = connect_sharing(f, 1, fast_client(20ms, 500ms)).front();
  auto failing = make_path_failing_channel(f, fast_client(20ms, 500ms));
  const auto third = connect_sharing(f, 1, fast_client(20ms, 500ms)).front();
  REQUIRE(run_until(f.io, [&] { return failing->stats().heartbeat_timeouts == 1; }));
  for (const auto& ch : {first, third}) {
    CHECK(ch->stats().heartbeat_timeouts == 0);
    CHECK(f.call(*ch) == status_code::ok);
    CHECK(ch->stats().connects == 1);
  }
}

TEST_CASE("heartbeat: no pings while replies flow", "[heartbeat]") {
  const auto target = GENERATE(as<std::string>{}, "loopback", "tcp");
  server_options so;
  // An interval far above one call's time even on a loaded, sanitized host: a single call slower
  // than it would rightly cost a ping.
  so.heartbeat_interval = 500ms;
  so.heartbeat_timeout = 2s;
  hb_fixture f(target, so);
  auto ch = f.make_channel(fast_client(500ms, 2s));
  const auto until = std::chrono::steady_clock::now() + 1500ms;  // three intervals of back-to-back calls
  while (std::chrono::steady_clock::now() < until) REQUIRE(f.call(*ch) == status_code::ok);
  CHECK(ch->stats().pings_sent == 0);
  CHECK(f.srv->stats().pings_sent == 0);
}

TEST_CASE("heartbeat: a client pinging faster than allowed is cut off (too_many_pings)", "[heartbeat]") {
  const auto target = GENERATE(as<std::string>{}, "loopback", "tcp");
  server_options so;  // min_ping_interval_allowed 200 ms, 2 strikes
  hb_fixture f(target, so);
  auto good = f.make_channel({});
  REQUIRE(f.call(*good) == status_code::ok);
  auto eager = f.make_channel(fast_client(5ms, 2s));
  client_context ctx;
  std::optional<boost::system::error_code> out;
  f.start(*eager, out, &ctx, /*sleep_ms=*/30000);  // in flight, no deadline, nothing comes back
  REQUIRE(run_until(f.io, [&] { return out.has_value(); }));
  CHECK(to_status_code(*out) == status_code::unavailable);
  CHECK(contains(ctx.status_message(), "too_many_pings"));
  CHECK(contains(ctx.status_message(), "RESOURCE_EXHAUSTED"));
  CHECK(eager->stats().too_many_pings == 1);
  CHECK(f.srv->stats().too_many_pings == 1);
  CHECK(f.service.wait_for([&] { return f.service.sleeps_cancelled.load() == 1; }));
  // The well-behaved client carries on, on its first connection.
  CHECK(f.call(*good) == status_code::ok);
  CHECK(good->stats().connects == 1);
}

namespace {

// A raw client on the test thread's io_context: it records what the server sends and answers
// nothing (no pongs) unless told to.
struct raw_fixture {
  boost::asio::io_context io{1};
  test::test_service service;
  std::optional<server> srv;
  std::shared_ptr<transport::connection> conn;
  std::shared_ptr<test::recording_handler> seen = std::make_shared<test::recording_handler>();

  explicit raw_fixture(const server_options& options) {
    srv.emplace(io.get_executor(), options);
    srv->add_service(service);
    auto [client_end, server_end] =
        transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
    srv->serve(server_end);
    conn = client_end;
    conn->start(seen);
  }
  ~raw_fixture() {
    srv.reset();
    io.restart();
    io.run_for(5s);
  }
  void send(frame::kind k, std::uint64_t value, std::uint32_t call_id = 0) {
    frame::header h;
    h.kind = k;
    h.call_id = call_id;
    h.timeout_us = value;
    REQUIRE_FALSE(conn->send_copy(boost::asio::buffer(test::encode_frame(h))));
  }
};

}  // namespace

TEST_CASE("heartbeat: the server closes the connection of a client that stops answering", "[heartbeat]") {
  server_options so;
  so.heartbeat_interval = 20ms;
  so.heartbeat_timeout = 60ms;
  raw_fixture f(so);
  REQUIRE(run_until(f.io, [&] { return f.seen->close_calls == 1; }));
  CHECK(test::find_frame(f.seen->messages, frame::kind::ping).has_value());
  CHECK(f.srv->stats().heartbeat_timeouts == 1);
  CHECK(f.srv->stats().pings_sent >= 1);
}

TEST_CASE("heartbeat: a ping is answered at once by a pong echoing its value", "[heartbeat][frame]") {
  server_options so;
  so.heartbeat_interval = 0ms;  // only our ping
  raw_fixture f(so);
  const std::uint64_t value = 0xFEEDFACECAFEBEEF;
  f.send(frame::kind::ping, value);
  std::optional<frame::header> pong;
  REQUIRE(run_until(f.io, [&] {
    pong = test::find_frame(f.seen->messages, frame::kind::pong);
    return pong.has_value() || f.seen->close_calls > 0;
  }));
  REQUIRE(pong);
  CHECK(pong->timeout_us == value);
  CHECK(pong->call_id == 0);
  CHECK(f.srv->stats().pings_received == 1);
  CHECK(f.seen->close_calls == 0);
}

TEST_CASE("heartbeat: a malformed ping is a protocol violation that closes only its connection",
          "[heartbeat][frame]") {
  server_options so;
  so.heartbeat_interval = 0ms;
  raw_fixture f(so);
  f.send(frame::kind::ping, 1, /*call_id=*/5);  // heartbeats belong to the connection: call id 0
  REQUIRE(run_until(f.io, [&] { return f.seen->close_calls == 1; }));
  CHECK_FALSE(test::find_frame(f.seen->messages, frame::kind::pong).has_value());
  // Another client of the same server carries on.
  auto [client_end, server_end] =
      transport::loopback::make_loopback_pair(f.io.get_executor(), f.io.get_executor());
  f.srv->serve(server_end);
  auto ch = channel::create(client_end);
  std::optional<boost::system::error_code> out;
  async_unary_call<test::EchoReply>(*ch, test::test_service::echo, nullptr, test::make_request("x"),
                                    [&](boost::system::error_code ec, test::EchoReply) { out = ec; });
  REQUIRE(run_until(f.io, [&] { return out.has_value(); }));
  CHECK(to_status_code(*out) == status_code::ok);
}

namespace {

// A raw tcp client of a server with fast heartbeats that never answers a ping: only what the
// transport sees of it (bytes arriving, bytes taken) can keep its connection up. Its reads and
// writes give up after 60 s (a server that neither answers nor closes fails the test, never hangs it).
struct trickle_fixture {
  test::e2e_harness h;
  boost::asio::io_context raw_io;
  boost::asio::ip::tcp::socket socket{raw_io};
  const std::chrono::steady_clock::time_point give_up = std::chrono::steady_clock::now() + 60s;

  explicit trickle_fixture(server_options options) : h("tcp", std::move(options)) {
    socket.open(boost::asio::ip::tcp::v4());
    // Small kernel buffers, so a long reply waits in the server's own queue, not in the kernel.
    socket.set_option(boost::asio::socket_base::receive_buffer_size(64 << 10));
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), transport::parse_endpoint(h.uri())->port});
    socket.set_option(boost::asio::ip::tcp::no_delay(true));
    socket.non_blocking(true);
  }

  // Call 1, an echo of `req`, as a length-prefixed tcp frame.
  static std::string echo_frame(const test::EchoRequest& req) {
    frame::header header;
    header.kind = frame::kind::request;
    header.call_id = 1;
    header.method_id = test::test_service::echo.id;
    const std::string bytes = test::encode_frame(header, {}, req.SerializeAsString());
    const auto length = test::le_length(static_cast<std::uint32_t>(bytes.size()));
    return std::string(reinterpret_cast<const char*>(length.data()), length.size()) + bytes;
  }

  // Waits (at most until give_up) for the socket to be readable (POLLIN) or writable (POLLOUT).
  void wait_for(short events) {
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    pollfd p{socket.native_handle(), events, 0};
    ::poll(&p, 1, 100);
  }

  void write(std::string_view bytes) {
    while (!bytes.empty()) {
      boost::system::error_code ec;
      const std::size_t n = socket.write_some(boost::asio::buffer(bytes.data(), bytes.size()), ec);
      if (ec == boost::asio::error::would_block) {
        wait_for(POLLOUT);
        continue;
      }
      REQUIRE_FALSE(ec);  // the server cut the connection
      bytes.remove_prefix(n);
    }
  }

  // Reads N bytes; the first `slow` of them CHUNK at a time with PAUSE between (a slow reader).
  std::vector<std::byte> read(std::size_t n, std::size_t slow = 0, std::size_t chunk = 0,
                              std::chrono::milliseconds pause = {}) {
    std::vector<std::byte> out(n);
    std::size_t done = 0;
    while (done < n) {
      // Up to the next chunk boundary (a short read leaves the rest of the chunk for the next).
      const std::size_t want =
          done < slow ? std::min({chunk - done % chunk, n - done, slow - done}) : n - done;
      boost::system::error_code ec;
      const std::size_t got = socket.read_some(boost::asio::buffer(out.data() + done, want), ec);
      if (ec == boost::asio::error::would_block) {
        wait_for(POLLIN);
        continue;
      }
      REQUIRE_FALSE(ec);  // the server cut the connection
      const bool chunk_done = done < slow && (done + got) % chunk == 0;
      done += got;
      if (chunk_done && done < slow) std::this_thread::sleep_for(pause);  // pacing the reader only
    }
    return out;
  }

  // The next frame that is not a ping (the server's pings are ignored), read as `read` does.
  frame::view next_answer(std::vector<std::byte>& storage, std::size_t slow = 0, std::size_t chunk = 0,
                          std::chrono::milliseconds pause = {}) {
    for (;;) {
      const auto length = read(4);
      const std::size_t size =
          std::to_integer<std::size_t>(length[0]) | std::to_integer<std::size_t>(length[1]) << 8 |
          std::to_integer<std::size_t>(length[2]) << 16 | std::to_integer<std::size_t>(length[3]) << 24;
      storage = read(size, slow, chunk, pause);
      frame::decode_error err{};
      const auto v = frame::decode(std::span<const std::byte>(storage.data(), storage.size()), err);
      REQUIRE(err == frame::decode_error::none);
      if (v.header.kind != frame::kind::ping) return v;
    }
  }
};

// A silent client is cut off after ~600 ms (interval + timeout + a tick); any gap of activity
// shorter than that is tolerated.
server_options fast_heartbeats() {
  server_options o;
  o.heartbeat_interval = 200ms;
  o.heartbeat_timeout = 200ms;
  o.min_ping_interval_allowed = 0ms;
  return o;
}

}  // namespace

TEST_CASE("heartbeat: a tcp request arriving for several heartbeat windows is served, not cut off",
          "[heartbeat]") {
  trickle_fixture f(fast_heartbeats());
  test::EchoRequest req;
  req.set_data(std::string(512u << 10, 'd'));
  const std::string bytes = trickle_fixture::echo_frame(req);
  // 4 KiB every 20 ms: about 2.6 s before the frame is whole.
  for (std::size_t at = 0; at < bytes.size(); at += 4096) {
    f.write(std::string_view(bytes).substr(at, 4096));
    std::this_thread::sleep_for(20ms);  // pacing the writer, not waiting for anything
  }
  std::vector<std::byte> storage;
  const auto answer = f.next_answer(storage);
  REQUIRE(answer.header.kind == frame::kind::response);
  CHECK(answer.header.call_id == 1);
  CHECK(answer.header.status == status_code::ok);
  test::EchoReply reply;
  REQUIRE(reply.ParseFromArray(answer.payload.data(), static_cast<int>(answer.payload.size())));
  CHECK(reply.data().size() == req.data().size());
  CHECK(f.h.server().stats().heartbeat_timeouts == 0);
}

TEST_CASE("heartbeat: a long tcp reply read slowly by a client that sends nothing is not cut off",
          "[heartbeat]") {
  server_options o = fast_heartbeats();
  o.transport.tcp_socket_buffer_bytes = 64u << 10;
  trickle_fixture f(o);
  test::EchoRequest req;
  req.set_reply_size(4u << 20);
  f.write(trickle_fixture::echo_frame(req));
  // 8 KiB every 5 ms for the first 3 MiB (about 2 s), then at full speed: the server's pings wait
  // behind the reply, and only the reply's bytes being taken show the client alive.
  std::vector<std::byte> storage;
  const auto answer = f.next_answer(storage, 3u << 20, 8u << 10, 5ms);
  REQUIRE(answer.header.kind == frame::kind::response);
  CHECK(answer.header.status == status_code::ok);
  test::EchoReply reply;
  REQUIRE(reply.ParseFromArray(answer.payload.data(), static_cast<int>(answer.payload.size())));
  CHECK(reply.data().size() == (4u << 20));
  CHECK(f.h.server().stats().heartbeat_timeouts == 0);
}
