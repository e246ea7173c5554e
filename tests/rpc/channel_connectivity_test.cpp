// Channel connectivity over tcp on the host (README, Channels): states and waiting for a change,
// fail-fast versus wait_for_ready calls while nothing listens, reconnecting to a server restarted
// on the same address, endpoint lists with round_robin and pick_first, an endpoint that goes away,
// host names resolved asynchronously; and the pure pieces (backoff, state aggregation, endpoint
// lists). The client runs on the test thread's io_context (run_until); each server on its own io
// thread. Every wait is bounded and nothing asserts time.
#include <algorithm>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "e2e_harness.hpp"
#include "rpc/channel.hpp"
#include "rpc/connectivity.hpp"
#include "rpc/server.hpp"
#include "rpc/unary_call.hpp"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"
#include "transport/endpoint.hpp"

using namespace rdmarpc;
using namespace std::chrono_literals;
using test::run_until;

namespace {

// A tcp server on its own io thread, counting the calls it served (sleep calls of 0 ms).
struct tcp_server {
  test::test_service service;
  std::optional<test::io_thread> io;
  std::unique_ptr<server> srv;
  transport::endpoint bound;

  explicit tcp_server(std::uint16_t port = 0) {
    io.emplace();
    srv = std::make_unique<server>(io->executor());
    srv->add_service(service);
    bound = srv->listen("tcp://127.0.0.1:" + std::to_string(port));
  }
  ~tcp_server() {
    srv.reset();
    CHECK(io->drain());
  }
  // A server process going away, while the client's io_context runs (a server closing its
  // connections waits for its clients to see it).
  void stop(boost::asio::io_context& client_io) {
    srv.reset();
    auto drained = std::async(std::launch::async, [this] { return io->drain(); });
    REQUIRE(run_until(client_io, [&] { return drained.wait_for(0s) == std::future_status::ready; }));
    CHECK(drained.get());
  }
  int served() const { return service.sleeps_started.load(); }
  std::string host_port() const { return "127.0.0.1:" + std::to_string(bound.port); }
};

// A port nothing listens on (bound once by the kernel's choice, then released).
std::uint16_t free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

struct client {
  boost::asio::io_context io{1};
  std::shared_ptr<channel> ch;

  ~client() {
    ch.reset();
    io.restart();
    io.run_for(5s);  // returns once the channel's teardown is done (out of work)
  }

  // A counted call (sleep of 0 ms); `out` is set when it completes.
  void start(std::optional<boost::system::error_code>& out, client_context* ctx = nullptr) {
    async_unary_call<test::EchoReply>(*ch, test::test_service::sleep, ctx, test::make_request("c", 0),
                                      [&out](boost::system::error_code ec, test::EchoReply) { out = ec; });
  }
  status_code call(client_context* ctx = nullptr) {
    std::optional<boost::system::error_code> out;
    start(out, ctx);
    REQUIRE(run_until(io, [&] { return out.has_value(); }));
    return to_status_code(*out);
  }
  // A round_robin channel over `servers`, connected to every one.
  void connect_round_robin(std::initializer_list<const tcp_server*> servers) {
    std::string uri = "tcp://";
    for (const auto* s : servers) uri += (uri.size() > 6 ? "," : "") + s->host_port();
    channel_options o;
    o.load_balancing = load_balancing_policy::round_robin;
    ch = channel::create(io.get_executor(), uri, o);
    ch->state(/*try_to_connect=*/true);
    REQUIRE(run_until(io, [&] { return ch->stats().connects == servers.size(); }));
  }
  // Waits (bounded) until the channel reports `want`.
  bool reach(channel_state want) {
    return run_until(io, [&] { return ch->state() == want; });
  }
};

client_context wait_for_ready(std::chrono::seconds timeout = 30s) {
  client_context ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_timeout(timeout);
  return ctx;
}

}  // namespace

TEST_CASE("connectivity: backoff grows by the multiplier up to the maximum with bounded jitter",
          "[connectivity]") {
  reconnect_backoff_options o;
  o.initial = 100ms;
  o.multiplier = 2.0;
  o.jitter = 0.2;
  o.max = 1s;
  reconnect_backoff b(o);
  // The middle of the jitter range is the base delay itself.
  CHECK(b.next(0.5) == 100ms);
  CHECK(b.next(0.5) == 200ms);
  CHECK(b.next(0.5) == 400ms);
  CHECK(b.next(0.5) == 800ms);
  CHECK(b.next(0.5) == 1s);  // capped
  CHECK(b.next(0.5) == 1s);
  // The ends of the jitter range: ±20 %.
  CHECK(b.next(0.0) == 800ms);
  CHECK(b.next(1.0) == 1200ms);
  b.reset();
  CHECK(b.next(0.5) == 100ms);
  // The defaults: 100 ms, then 160 ms.
  reconnect_backoff d;
  CHECK(d.next(0.5) == 100ms);
  CHECK(d.next(0.5) == 160ms);
}

TEST_CASE("connectivity: one state for many endpoints", "[connectivity]") {
  using s = channel_state;
  const auto agg = [](std::vector<s> v) { return aggregate_state(v); };
  CHECK(agg({}) == s::idle);
  CHECK(agg({s::transient_failure, s::ready, s::connecting}) == s::ready);
  CHECK(agg({s::transient_failure, s::connecting, s::idle}) == s::connecting);
  CHECK(agg({s::transient_failure, s::idle}) == s::idle);
  CHECK(agg({s::transient_failure, s::transient_failure}) == s::transient_failure);
  CHECK(to_string(s::transient_failure) == "transient_failure");
}

namespace {
// Endpoint statuses by hand for load_balancer, and what it picks or connects.
struct endpoints {
  std::vector<endpoint_status> list;
  auto status_of() const {
    return [this](std::size_t e) -> const endpoint_status& { return list.at(e); };
  }
  std::vector<std::size_t> picks(load_balancer& lb, int n, bool need_room = false) const {
    std::vector<std::size_t> got;
    for (int i = 0; i < n; ++i) got.push_back(lb.pick(list.size(), status_of(), need_room));
    return got;
  }
  std::vector<std::size_t> to_connect(const load_balancer& lb) {
    std::vector<std::size_t> got;
    lb.connect_wanted(list.size(), status_of(), [&](std::size_t e) {
      got.push_back(e);
      list.at(e).state = channel_state::connecting;  // what the channel does
    });
    return got;
  }
};
using idx = std::vector<std::size_t>;
constexpr std::size_t none = load_balancer::none;
}  // namespace

TEST_CASE("connectivity: pick_first uses the first endpoint that takes calls and connects one at a time",
          "[connectivity]") {
  using s = channel_state;
  load_balancer lb(load_balancing_policy::pick_first);
  endpoints eps{{{s::idle}, {s::idle}, {s::idle}}};
  CHECK(eps.picks(lb, 1) == idx{none});
  CHECK(eps.to_connect(lb) == idx{0});
  CHECK(eps.to_connect(lb).empty());  // one is connecting: no other starts
  eps.list[0].state = s::transient_failure;
  CHECK(eps.to_connect(lb) == idx{1});  // the next in order, at once
  eps.list[1].state = s::ready;
  eps.list[2].state = s::ready;
  CHECK(eps.picks(lb, 3) == idx{1, 1, 1});  // stays on it
  // A wait for room on it: none, not the next endpoint.
  eps.list[1].reserving = true;
  CHECK(eps.picks(lb, 1, /*need_room=*/true) == idx{none});
  CHECK(eps.picks(lb, 1) == idx{1});
  // Draining (the server goes away): the next one takes the calls; the channel's state counts it
  // idle, and nothing connects while another endpoint takes calls.
  eps.list[1].draining = true;
  CHECK(eps.picks(lb, 2) == idx{2, 2});
  eps.list[0].state = s::idle;
  CHECK(eps.to_connect(lb).empty());
  eps.list[2].state = s::transient_failure;
  CHECK(load_balancer::aggregate(eps.list.size(), eps.status_of()) == s::idle);
  CHECK(eps.to_connect(lb) == idx{0});
}

TEST_CASE("connectivity: round_robin takes the ready endpoints in turn and connects every idle one",
          "[connectivity]") {
  using s = channel_state;
  load_balancer lb(load_balancing_policy::round_robin);
  endpoints eps{{{s::idle}, {s::transient_failure}, {s::idle}}};
  CHECK(eps.to_connect(lb) == idx{0, 2});
  CHECK(load_balancer::aggregate(eps.list.size(), eps.status_of()) == s::connecting);
  eps.list[0].state = s::ready;
  eps.list[2].state = s::ready;
  CHECK(eps.picks(lb, 4) == idx{0, 2, 0, 2});  // the failed one skipped
  eps.list[1].state = s::ready;
  CHECK(eps.picks(lb, 3) == idx{0, 1, 2});  // it joins in its turn
  // need_room skips one that waits for room (and its turn goes on from the one picked).
  eps.list[2].reserving = true;
  CHECK(eps.picks(lb, 3, /*need_room=*/true) == idx{0, 1, 0});
  eps.list[0].draining = true;
  eps.list[1].reserving = true;
  CHECK(eps.picks(lb, 1, /*need_room=*/true) == idx{none});
  CHECK(eps.picks(lb, 2) == idx{1, 2});
  CHECK(load_balancer::aggregate(eps.list.size(), eps.status_of()) == s::ready);
}

TEST_CASE("connectivity: endpoint lists share the first scheme and refuse empty entries", "[connectivity]") {
  auto two = transport::parse_endpoint_list("rdma://10.0.0.1:7471,10.0.0.2:7472");
  REQUIRE(two.has_value());
  REQUIRE(two->size() == 2);
  CHECK((*two)[1].scheme == transport::scheme::rdma);
  CHECK((*two)[1].host == "10.0.0.2");
  CHECK((*two)[1].port == 7472);
  auto mixed = transport::parse_endpoint_list("tcp://a:1,rdma://[::1]:2");
  REQUIRE(mixed.has_value());
  CHECK((*mixed)[1].scheme == transport::scheme::rdma);
  CHECK((*mixed)[1].host == "::1");
  CHECK_FALSE(transport::parse_endpoint_list("tcp://a:1,").has_value());
  CHECK_FALSE(transport::parse_endpoint_list("tcp://a:1,,b:2").has_value());
  CHECK_FALSE(transport::parse_endpoint_list("a:1,b:2").has_value());
  CHECK_FALSE(transport::parse_endpoint_list("tcp://a:1,b").has_value());
  CHECK(transport::is_numeric_host("10.0.0.1"));
  CHECK(transport::is_numeric_host("::1"));
  CHECK_FALSE(transport::is_numeric_host("localhost"));
}

TEST_CASE("connectivity: a channel is idle until asked and reports each change to a waiter",
          "[connectivity]") {
  tcp_server s;
  client c;
  c.ch = channel::create(c.io.get_executor(), "tcp://" + s.host_port());
  CHECK(c.ch->state() == channel_state::idle);
  std::vector<channel_state> seen{channel_state::idle};
  bool done = false;
  std::function<void()> wait = [&] {
    c.ch->async_wait_for_state_change(seen.back(), [&](boost::system::error_code ec, channel_state now) {
      REQUIRE_FALSE(ec);
      seen.push_back(now);
      if (now == channel_state::ready) {
        done = true;
      } else {
        wait();
      }
    });
  };
  wait();
  CHECK(c.ch->state(/*try_to_connect=*/true) == channel_state::idle);
  REQUIRE(run_until(c.io, [&] { return done; }));
  CHECK(seen ==
        std::vector<channel_state>{channel_state::idle, channel_state::connecting, channel_state::ready});
  CHECK(c.call() == status_code::ok);
  CHECK(s.served() == 1);

  // Cancelled through its slot: operation_aborted. After close: shutdown, and a wait on shutdown
  // completes at once.
  boost::asio::cancellation_signal cancel;
  std::optional<boost::system::error_code> aborted;
  c.ch->async_wait_for_state_change(
      channel_state::ready,
      boost::asio::bind_cancellation_slot(
          cancel.slot(), [&](boost::system::error_code ec, channel_state) { aborted = ec; }));
  test::run_ready(c.io);
  cancel.emit(boost::asio::cancellation_type::terminal);
  REQUIRE(run_until(c.io, [&] { return aborted.has_value(); }));
  CHECK(*aborted == boost::asio::error::operation_aborted);
  c.ch->close();
  REQUIRE(c.reach(channel_state::shutdown));
  std::optional<boost::system::error_code> on_shutdown;
  c.ch->async_wait_for_state_change(channel_state::shutdown,
                                    [&](boost::system::error_code ec, channel_state) { on_shutdown = ec; });
  REQUIRE(run_until(c.io, [&] { return on_shutdown.has_value(); }));
  CHECK(*on_shutdown == boost::asio::error::shut_down);
  CHECK(c.call() == status_code::unavailable);
}

TEST_CASE("connectivity: with nothing listening calls fail fast and wait_for_ready calls wait for a server",
          "[connectivity]") {
  const std::uint16_t port = free_port();
  std::optional<tcp_server> s;  // outlives the client: see tcp_server::stop
  client c;
  channel_options o;
  // A backoff long enough that the second call below surely falls inside it on a loaded host.
  o.reconnect.initial = 500ms;
  o.reconnect.max = 500ms;
  c.ch = channel::create(c.io.get_executor(), "tcp://127.0.0.1:" + std::to_string(port), o);
  client_context failed;
  CHECK(c.call(&failed) == status_code::unavailable);
  CHECK(failed.status_message().find("cannot connect") != std::string::npos);
  CHECK(c.ch->state() == channel_state::transient_failure);
  // During the backoff a fail-fast call fails at once, without a connection attempt.
  const auto attempts = c.ch->stats().connect_failures;
  CHECK(c.call() == status_code::unavailable);
  CHECK(c.ch->stats().connect_failures == attempts);

  auto ready = wait_for_ready();
  std::optional<boost::system::error_code> out;
  c.start(out, &ready);
  // It rides out failed attempts (with backoff) until a server appears on the address.
  REQUIRE(run_until(c.io, [&] { return c.ch->stats().connect_failures >= attempts + 2; }));
  CHECK_FALSE(out.has_value());
  s.emplace(port);
  REQUIRE(run_until(c.io, [&] { return out.has_value(); }));
  CHECK_FALSE(*out);
  CHECK(s->served() == 1);
  CHECK(c.ch->state() == channel_state::ready);
  CHECK(c.ch->stats().connects == 1);
}

TEST_CASE("connectivity: a server restarted on the same address gets the channel back", "[connectivity]") {
  auto first = std::make_unique<tcp_server>();
  const std::uint16_t port = first->bound.port;
  std::optional<tcp_server> second;
  client c;
  channel_options o;
  o.reconnect.initial = 20ms;
  o.reconnect.max = 100ms;
  c.ch = channel::create(c.io.get_executor(), "tcp://" + first->host_port(), o);
  CHECK(c.call() == status_code::ok);
  first->stop(c.io);  // the server goes away: a clean close
  REQUIRE(run_until(c.io, [&] { return c.ch->state() != channel_state::ready; }));
  // Calls made while it is down wait for ready; a new server process takes the address.
  std::vector<std::optional<boost::system::error_code>> outs(8);
  std::vector<client_context> contexts;
  for (std::size_t i = 0; i < outs.size(); ++i) contexts.push_back(wait_for_ready());
  for (std::size_t i = 0; i < outs.size(); ++i) c.start(outs[i], &contexts[i]);
  REQUIRE(run_until(c.io, [&] { return c.ch->stats().connect_failures >= 1; }));
  second.emplace(port);
  REQUIRE(run_until(c.io, [&] {
    for (const auto& out : outs)
      if (!out) return false;
    return true;
  }));
  for (const auto& out : outs) CHECK_FALSE(*out);
  CHECK(second->served() == 8);
  CHECK(c.ch->stats().connects == 2);
}

TEST_CASE("connectivity: a channel dropped, then its io_context destroyed unrun, closes its connection",
          "[connectivity]") {
  // A program's end: the last handle goes, then the io_context, which never runs again. The task
  // that would close the channel is destroyed unrun; the connection must close all the same (the
  // channel, its connection and the connection's handler must not keep each other alive).
  tcp_server server;
  {
    auto io = std::make_unique<boost::asio::io_context>(1);
    auto ch = channel::create(io->get_executor(), "tcp://" + server.host_port());
    std::optional<boost::system::error_code> out;
    async_unary_call<test::EchoReply>(*ch, test::test_service::sleep, nullptr, test::make_request("c", 0),
                                      [&out](boost::system::error_code ec, test::EchoReply) { out = ec; });
    REQUIRE(run_until(*io, [&] { return out.has_value(); }));
    CHECK_FALSE(*out);
    ch.reset();
    io.reset();
  }
  REQUIRE(server.srv->stats().connections_accepted == 1);
  boost::asio::io_context waiting;  // run_until's bounded wait; nothing runs on it
  CHECK(run_until(
      waiting, [&] { return server.srv->stats().connections == 0; }, 10s));
  // Closed by the client's end, not found dead by the server's heartbeat (what a leaked connection
  // that no io_context runs any more comes to).
  CHECK(server.srv->stats().heartbeat_timeouts == 0);
}

TEST_CASE("connectivity: round_robin spreads calls evenly over three servers", "[connectivity]") {
  tcp_server a, b, s3;
  client c;
  c.connect_round_robin({&a, &b, &s3});
  // In flight together, as a loaded client has them.
  std::vector<std::optional<boost::system::error_code>> outs(300);
  for (auto& out : outs) c.start(out);
  REQUIRE(run_until(c.io, [&] {
    for (const auto& out : outs)
      if (!out) return false;
    return true;
  }));
  for (const auto& out : outs) CHECK_FALSE(*out);
  CHECK(a.served() == 100);
  CHECK(b.served() == 100);
  CHECK(s3.served() == 100);

  // One goes away (cleanly; once the channel saw it): the next calls, waiting for ready, all
  // succeed on the other two. (Calls a server takes down with it fail UNAVAILABLE: never re-sent.)
  b.stop(c.io);
  REQUIRE(run_until(c.io, [&] { return c.ch->stats().disconnects == 1; }));
  std::vector<std::optional<boost::system::error_code>> after(200);
  std::vector<client_context> contexts;
  for (std::size_t i = 0; i < after.size(); ++i) contexts.push_back(wait_for_ready());
  for (std::size_t i = 0; i < after.size(); ++i) c.start(after[i], &contexts[i]);
  REQUIRE(run_until(c.io, [&] {
    for (const auto& out : after)
      if (!out) return false;
    return true;
  }));
  for (const auto& out : after) CHECK_FALSE(*out);
  CHECK(a.served() + s3.served() == 400);
  CHECK(a.served() >= 150);
  CHECK(s3.served() >= 150);
  CHECK(c.ch->state() == channel_state::ready);
}

TEST_CASE("connectivity: pick_first skips an endpoint nothing listens on and stays on the next",
          "[connectivity]") {
  const std::uint16_t dead = free_port();
  tcp_server a, b;
  client c;
  c.ch = channel::create(c.io.get_executor(), "tcp://127.0.0.1:" + std::to_string(dead) + "," +
                                                  a.host_port() + "," + b.host_port());
  for (int i = 0; i < 10; ++i) CHECK(c.call() == status_code::ok);
  CHECK(a.served() == 10);
  CHECK(b.served() == 0);
  CHECK(c.ch->stats().connects == 1);
  CHECK(c.ch->stats().connect_failures >= 1);
  // Its endpoint goes away: calls move to the next one.
  a.stop(c.io);
  for (int i = 0; i < 10; ++i) {
    auto ctx = wait_for_ready();
    CHECK(c.call(&ctx) == status_code::ok);
  }
  CHECK(b.served() == 10);
}

TEST_CASE("connectivity: a host name is resolved without blocking and its addresses are tried in turn",
          "[connectivity]") {
  tcp_server s;
  client c;
  // localhost may resolve to ::1 too, where nothing listens: pick_first moves past it.
  c.ch = channel::create(c.io.get_executor(), "tcp://localhost:" + std::to_string(s.bound.port));
  auto ctx = wait_for_ready();
  CHECK(c.call(&ctx) == status_code::ok);
  CHECK(s.served() == 1);
}

namespace {

// Keeps `depth` counted calls (wait_for_ready) in flight until `total` were made; counts failures.
struct closed_loop {
  client& c;
  int total;
  int started = 0, ok = 0, failed = 0;
  std::vector<std::unique_ptr<client_context>> contexts;

  void start(int depth) {
    for (int i = 0; i < depth; ++i) next();
  }
  void next() {
    if (started == total) return;
    ++started;
    contexts.push_back(std::make_unique<client_context>(wait_for_ready()));
    async_unary_call<test::EchoReply>(*c.ch, test::test_service::sleep, contexts.back().get(),
                                      test::make_request("l", 0),
                                      [this](boost::system::error_code ec, test::EchoReply) {
                                        (ec ? failed : ok) += 1;
                                        next();
                                      });
  }
  bool done() const { return ok + failed == total; }
};

}  // namespace

TEST_CASE("connectivity: a server going away under load loses no call", "[connectivity]") {
  tcp_server a, b, s3;
  client c;
  c.connect_round_robin({&a, &b, &s3});
  closed_loop load{c, 3000};
  load.start(32);
  REQUIRE(run_until(c.io, [&] { return load.ok >= 300; }));
  // b shuts down gracefully while calls keep flowing to it.
  std::promise<void> shut;
  b.srv->async_shutdown(10s, [&] { shut.set_value(); });
  auto shut_done = shut.get_future();
  REQUIRE(run_until(c.io, [&] { return shut_done.wait_for(0s) == std::future_status::ready; }));
  const int b_served = b.served();
  REQUIRE(run_until(c.io, [&] { return load.done(); }));
  CHECK(load.failed == 0);
  CHECK(load.ok == 3000);
  CHECK(b.served() == b_served);  // nothing reached it after it closed
  CHECK(a.served() + b.served() + s3.served() == 3000);
  CHECK(c.ch->stats().going_aways == 1);
  CHECK(c.ch->stats().calls_failed == 0);
}

TEST_CASE("connectivity: going away lets calls in flight finish, then new calls find no server",
          "[connectivity]") {
  // Declared before the server and the client that write them, so they outlive both even when a
  // REQUIRE below fails.
  std::promise<void> shut;
  std::vector<std::optional<boost::system::error_code>> slow(4);
  tcp_server s;
  client c;
  c.ch = channel::create(c.io.get_executor(), "tcp://" + s.host_port());
  CHECK(c.call() == status_code::ok);
  for (auto& out : slow) {
    // Held until the client has seen the going-away: however slow the machine, they are in flight.
    async_unary_call<test::EchoReply>(*c.ch, test::test_service::sleep, nullptr,
                                      test::make_request("s", test::test_service::until_released),
                                      [&out](boost::system::error_code ec, test::EchoReply) { out = ec; });
  }
  REQUIRE(run_until(c.io, [&] { return s.service.sleeps_started.load() == 5; }));
  s.srv->async_shutdown(30s, [&] { shut.set_value(); });
  auto shut_done = shut.get_future();
  REQUIRE(run_until(c.io, [&] { return c.ch->stats().going_aways == 1; }));
  for (const auto& out : slow) CHECK_FALSE(out.has_value());  // still in flight after the going-away
  s.service.release_held();
  // The server's shutdown completes once the replies are written; the client reads them after that.
  REQUIRE(run_until(c.io, [&] {
    return shut_done.wait_for(0s) == std::future_status::ready &&
           std::all_of(slow.begin(), slow.end(), [](const auto& out) { return out.has_value(); });
  }));
  for (const auto& out : slow) {
    REQUIRE(out.has_value());
    CHECK_FALSE(*out);
  }
  // The server stopped listening: the next fail-fast call finds nobody.
  client_context ctx;
  CHECK(c.call(&ctx) == status_code::unavailable);
}
