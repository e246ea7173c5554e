// End-to-end rpc cases, run over every target the binary lists in e2e_targets() (loopback and
// tcp on the host, rdma in the Soft-RoCE VM). Each case asserts on what the client and the server
// observed; every wait is bounded so a bug shows up as a failure, never as a hang.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "e2e_harness.hpp"
#include "rpc/extras.hpp"
#include "rpc/frame.hpp"
#include "rpc/server_context.hpp"
#include "transport/connect.hpp"

using namespace rdmarpc;
using namespace rdmarpc::test;
using namespace std::chrono_literals;

namespace {

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return s;
}

status_code code_of(const call_result& r) {
  return to_status_code(r.ec);
}

// Starts a process serving test_service on `target`, on `port` (0 = any; the bound port is
// written back). The child re-executes this test binary (hidden case "e2e-helper: serve")
// instead of only forking: librdmacm caches verbs contexts per process, and a forked child may
// not use its parent's (the kernel refuses: "changed security contexts").
pid_t fork_server(const std::string& target, std::uint16_t& port) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  std::string uri = listen_uri(target);
  uri = uri.substr(0, uri.rfind(':') + 1) + std::to_string(port);
  const std::string env_uri = "RDMARPC_TEST_SERVE_URI=" + uri;
  const std::string env_fd = "RDMARPC_TEST_SERVE_FD=" + std::to_string(fds[1]);
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    ::close(fds[0]);
    ::putenv(const_cast<char*>(env_uri.c_str()));
    ::putenv(const_cast<char*>(env_fd.c_str()));
    ::execl("/proc/self/exe", "e2e-server", "e2e-helper: serve", static_cast<char*>(nullptr));
    ::_exit(5);
  }
  ::close(fds[1]);
  std::uint16_t bound = 0;
  const auto got = ::read(fds[0], &bound, sizeof bound);
  ::close(fds[0]);
  if (got != static_cast<ssize_t>(sizeof bound) || bound == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return -1;
  }
  port = bound;
  return child;
}

}  // namespace

TEST_CASE("e2e: unary echo with 0 B, 1 KiB and 4 MiB payloads", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  for (std::size_t size : {std::size_t{0}, std::size_t{1024}, std::size_t{4} << 20}) {
    CAPTURE(size);
    client_context ctx;
    const auto data = pattern(size, static_cast<unsigned>(size));
    const auto r = call(*ch, test_service::echo, make_request(data), &ctx);
    REQUIRE_FALSE(r.ec);
    CHECK(ctx.status() == status_code::ok);
    CHECK(r.reply.data().size() == size);
    CHECK(r.reply.data() == data);
  }
  const auto stats = ch->stats();
  CHECK(stats.calls_ok == 3);
  CHECK(stats.calls_failed == 0);
}

TEST_CASE("e2e: a caller's own reply message is filled call after call, and a failed call clears it",
          "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  EchoReply reply;  // one message for every call (one call at a time)
  const auto call_into = [&](const method_descriptor& method, const EchoRequest& request,
                             client_context* ctx) {
    std::promise<boost::system::error_code> done;
    auto f = done.get_future();
    async_unary_call(*ch, method, ctx, request, reply,
                     [&done](boost::system::error_code ec) { done.set_value(ec); });
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    return f.get();
  };
  for (std::size_t size : {std::size_t{64}, std::size_t{1024}, std::size_t{16}, std::size_t{0}}) {
    CAPTURE(size);
    const auto data = pattern(size, static_cast<unsigned>(size) + 1);
    REQUIRE_FALSE(call_into(test_service::echo, make_request(data), nullptr));
    CHECK(reply.data() == data);  // the shorter reply replaced the longer one
  }
  reply.set_data("left from before");
  client_context ctx;
  const auto ec = call_into(test_service::fail, make_request("x"), &ctx);
  CHECK(ec);
  CHECK(ctx.status() != status_code::ok);
  CHECK(reply.data().empty());
  REQUIRE_FALSE(call_into(test_service::echo, make_request("again"), nullptr));
  CHECK(reply.data() == "again");
  // A deadline: cleared too, and the expired call's late answer never lands in the next call's.
  client_context short_deadline;
  short_deadline.set_timeout(20ms);
  CHECK(call_into(test_service::sleep, make_request("slow", test_service::until_released), &short_deadline) ==
        status_code::deadline_exceeded);
  CHECK(reply.data().empty());
  REQUIRE_FALSE(call_into(test_service::echo, make_request("after the deadline"), nullptr));
  CHECK(reply.data() == "after the deadline");
  CHECK(ch->stats().calls_ok == 6);
}

TEST_CASE("e2e: 10000 calls with 64 in flight are all answered and matched to their callers", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  constexpr int kCalls = 10000;
  constexpr int kWindow = 64;

  struct state {
    std::shared_ptr<channel> ch;
    int next = 0;
    int done = 0;
    int mismatched = 0;
    int failed = 0;
    int max_in_flight = 0;
    int in_flight = 0;
    std::promise<void> finished;
  };
  auto st = std::make_shared<state>();
  st->ch = ch;
  // Runs on the client io thread only (callbacks complete there), so `state` needs no lock.
  std::function<void()> start_one;
  start_one = [st, &start_one] {
    const int i = st->next++;
    ++st->in_flight;
    st->max_in_flight = std::max(st->max_in_flight, st->in_flight);
    async_unary_call<EchoReply>(*st->ch, test_service::echo, nullptr,
                                make_request("call-" + std::to_string(i)),
                                [st, i, &start_one](boost::system::error_code ec, EchoReply reply) {
                                  --st->in_flight;
                                  if (ec) ++st->failed;
                                  if (reply.data() != "call-" + std::to_string(i)) ++st->mismatched;
                                  if (++st->done == kCalls) st->finished.set_value();
                                  if (st->next < kCalls) start_one();
                                });
  };
  auto fut = st->finished.get_future();
  boost::asio::post(h.client_executor(), [&] {
    for (int i = 0; i < kWindow; ++i) start_one();
  });
  REQUIRE(fut.wait_for(120s) == std::future_status::ready);
  CHECK(st->done == kCalls);
  CHECK(st->failed == 0);
  CHECK(st->mismatched == 0);
  CHECK(st->max_in_flight == kWindow);
  st->ch.reset();
}

TEST_CASE("e2e: a handler never runs inside the call that started it, even on the channel's own thread",
          "[e2e]") {
  // The channel submits calls made on its own thread without a trip through the scheduler and
  // completes a reply's call inline from the transport; neither may run a handler inside an
  // initiating function. Calls that fail at once (deadline already past) show it.
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  struct outcome {
    bool top_returned = false, top_ran_inside = false;
    bool nested_returned = false, nested_ran_inside = false;
    boost::system::error_code reply_ec, top_ec, nested_ec;
    int handlers = 0;
    client_context past_top, past_nested;
    std::promise<void> done;
  };
  auto o = std::make_shared<outcome>();
  o->past_top.set_deadline(std::chrono::steady_clock::now() - 1s);
  o->past_nested.set_deadline(std::chrono::steady_clock::now() - 1s);
  const auto finished = [o] {
    if (++o->handlers == 3) o->done.set_value();
  };
  boost::asio::post(h.client_executor(), [&, o, finished] {
    async_unary_call<EchoReply>(*ch, test_service::echo, &o->past_top, make_request("x"),
                                [o, finished](boost::system::error_code ec, EchoReply) {
                                  o->top_ec = ec;
                                  o->top_ran_inside = !o->top_returned;
                                  finished();
                                });
    o->top_returned = true;
    // A real reply; its handler (completed from the transport) starts a call that fails at once.
    async_unary_call<EchoReply>(*ch, test_service::echo, nullptr, make_request("first"),
                                [o, finished, ch](boost::system::error_code ec, EchoReply) {
                                  o->reply_ec = ec;
                                  async_unary_call<EchoReply>(
                                      *ch, test_service::echo, &o->past_nested, make_request("y"),
                                      [o, finished](boost::system::error_code ec2, EchoReply) {
                                        o->nested_ec = ec2;
                                        o->nested_ran_inside = !o->nested_returned;
                                        finished();
                                      });
                                  o->nested_returned = true;
                                  finished();
                                });
  });
  REQUIRE(o->done.get_future().wait_for(30s) == std::future_status::ready);
  CHECK_FALSE(o->reply_ec);
  CHECK(to_status_code(o->top_ec) == status_code::deadline_exceeded);
  CHECK(to_status_code(o->nested_ec) == status_code::deadline_exceeded);
  CHECK_FALSE(o->top_ran_inside);
  CHECK_FALSE(o->nested_ran_inside);
}

TEST_CASE("e2e: an expired deadline gives DEADLINE_EXCEEDED and cancels the server handler", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  client_context ctx;
  // Long enough for the request to reach the handler even in a loaded emulated VM (the handler's
  // cancellation is asserted), far below the handler's 20 s.
  ctx.set_timeout(2s);
  const auto r = call(*ch, test_service::sleep, make_request("slow", 20000), &ctx);
  CHECK(code_of(r) == status_code::deadline_exceeded);
  CHECK(ctx.status() == status_code::deadline_exceeded);
  CHECK(r.elapsed < 10s);  // far below the handler's 20 s: the client did not wait for it
  CHECK(h.service().wait_for([&] { return h.service().sleeps_cancelled.load() == 1; }));
  CHECK(h.service().sleeps_finished.load() == 0);

  SECTION("channel default_timeout applies when the context has none") {
    channel_options o;
    o.default_timeout = 2s;
    auto ch2 = h.make_channel(o);
    const auto r2 = call(*ch2, test_service::sleep, make_request("slow", 20000));
    CHECK(code_of(r2) == status_code::deadline_exceeded);
    CHECK(h.service().wait_for([&] { return h.service().sleeps_cancelled.load() == 2; }));
    // A deadline already in the past fails without reaching the server.
    client_context past;
    past.set_deadline(std::chrono::steady_clock::now() - 1s);
    CHECK(code_of(call(*ch2, test_service::echo, make_request("x"), &past)) ==
          status_code::deadline_exceeded);
    CHECK(h.service().sleeps_started.load() == 2);
  }
}

// The channel's calls share one deadline timer (deadline_queue): a shorter deadline started after a
// longer one must still end first, no call may end before its deadline, and the many calls that
// finish early must leave nothing behind that ends a later call.
TEST_CASE("e2e: calls' deadlines end each call in deadline order, never early", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  client_context longer, shorter;
  longer.set_timeout(4s);
  auto slow_long = start_call(*ch, test_service::sleep, make_request("long", 20000), &longer);
  shorter.set_timeout(1s);
  auto slow_short = start_call(*ch, test_service::sleep, make_request("short", 20000), &shorter);
  // Quick calls with deadlines that finish long before them (their entries go stale).
  for (int i = 0; i < 200; ++i) {
    client_context quick;
    quick.set_timeout(2s);
    REQUIRE_FALSE(call(*ch, test_service::echo, make_request("q"), &quick).ec);
  }
  REQUIRE(slow_short.wait_for(30s) == std::future_status::ready);
  const auto s = slow_short.get();
  CHECK(code_of(s) == status_code::deadline_exceeded);
  // Never before its deadline. The deadline was set before start_call took its start time, so
  // `elapsed` may fall short of the timeout by that gap (it did, by 142 us, under ASan in the VM).
  CHECK(s.completed_at >= shorter.deadline());
  // The shorter one ended first: the longer call is still in flight until its own deadline.
  CHECK(slow_long.wait_for(0s) == std::future_status::timeout);
  REQUIRE(slow_long.wait_for(30s) == std::future_status::ready);
  const auto l = slow_long.get();
  CHECK(code_of(l) == status_code::deadline_exceeded);
  CHECK(l.completed_at >= longer.deadline());
}

TEST_CASE("e2e: a call made for a server call (set_parent) ends by the parent's deadline", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  // The call a handler serves: its deadline is 2 s away (long enough for the child's request to
  // reach the server even in a loaded VM, far below the sleep's 20 s).
  boost::asio::io_context unused;
  const server_context parent(unused.get_executor(), "/test.Parent/Call", "test://client",
                              std::chrono::steady_clock::now() + 2s, {});
  client_context child;  // no deadline of its own
  child.set_parent(parent);
  const auto r = call(*ch, test_service::sleep, make_request("slow", 20000), &child);
  CHECK(code_of(r) == status_code::deadline_exceeded);
  CHECK(r.elapsed < 10s);
  CHECK(h.service().wait_for([&] { return h.service().sleeps_cancelled.load() == 1; }));
  // The cap is applied per call: the context keeps its own deadline (none).
  CHECK(child.deadline() == std::chrono::steady_clock::time_point::max());
}

TEST_CASE("e2e: cancellation through the handler's cancellation slot gives CANCELLED and stops the server",
          "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  boost::asio::cancellation_signal signal;
  std::promise<call_result> p;
  auto f = p.get_future();
  client_context ctx;
  const auto req = make_request("cancel me", 20000);
  boost::asio::post(h.client_executor(), [&] {
    async_unary_call<EchoReply>(*ch, test_service::sleep, &ctx, req,
                                boost::asio::bind_cancellation_slot(
                                    signal.slot(), [&p](boost::system::error_code ec, EchoReply reply) {
                                      p.set_value({ec, std::move(reply), {}});
                                    }));
  });
  REQUIRE(h.service().wait_for([&] { return h.service().sleeps_started.load() == 1; }));
  // Emit on the handler's executor, as Asio requires.
  boost::asio::post(h.client_executor(), [&] { signal.emit(boost::asio::cancellation_type::terminal); });
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK(code_of(f.get()) == status_code::cancelled);
  CHECK(ctx.status() == status_code::cancelled);
  CHECK(h.service().wait_for([&] { return h.service().sleeps_cancelled.load() == 1; }));
  // The channel still works afterwards.
  CHECK_FALSE(call(*ch, test_service::echo, make_request("after")).ec);
}

TEST_CASE("e2e: unknown method, handler exceptions, bad payload and metadata", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();

  client_context c1;
  CHECK(code_of(call(*ch, test_service::unknown, make_request("?"), &c1)) == status_code::unimplemented);
  CHECK(c1.status() == status_code::unimplemented);

  client_context c2;
  CHECK(code_of(call(*ch, test_service::throws, make_request("x"), &c2)) == status_code::internal);
  CHECK(c2.status_message().find("boom") != std::string::npos);

  client_context c3;
  CHECK(code_of(call(*ch, test_service::fail, make_request("k1"), &c3)) == status_code::not_found);
  CHECK(c3.status() == status_code::not_found);
  CHECK(c3.status_message() == "no such key: k1");

  // A request the server cannot parse: invalid UTF-8 in a proto3 string field.
  RawRequest raw;
  raw.set_text(std::string("\xff\xfe", 2));
  std::promise<boost::system::error_code> p;
  auto f = p.get_future();
  client_context c4;
  async_unary_call<EchoReply>(*ch, test_service::echo, &c4, raw,
                              [&p](boost::system::error_code ec, EchoReply) { p.set_value(ec); });
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK(to_status_code(f.get()) == status_code::invalid_argument);
  CHECK(c4.status_message().find("cannot parse") != std::string::npos);

  client_context c5;
  c5.add_metadata("trace", "t-1");
  c5.add_metadata("user", "ann");
  const auto r = call(*ch, test_service::meta, make_request(""), &c5);
  REQUIRE_FALSE(r.ec);
  CHECK(r.reply.data() == "trace=t-1;user=ann;");
  CHECK(c5.server_initial_metadata() == metadata{{"echo-trace", "t-1"}, {"echo-user", "ann"}});
  CHECK(c5.server_trailing_metadata() == metadata{{"count", "2"}});

  // Metadata travel with an error status too; a reused context holds only the last call's.
  const auto failed = call(*ch, test_service::meta, make_request("fail"), &c5);
  CHECK(code_of(failed) == status_code::not_found);
  CHECK(c5.status_message() == "failed as asked");
  CHECK(c5.server_initial_metadata() == metadata{{"echo-trace", "t-1"}, {"echo-user", "ann"}});
  CHECK(c5.server_trailing_metadata() == metadata{{"count", "2"}});
  CHECK(c3.server_initial_metadata().empty());  // a handler that set none

  // The server reuses a finished call's context for the next call on the connection: nothing of
  // the failed call's status, metadata or client metadata carries over.
  client_context c6;
  const auto after = call(*ch, test_service::meta, make_request(""), &c6);
  REQUIRE_FALSE(after.ec);
  CHECK(c6.status() == status_code::ok);
  CHECK(c6.status_message().empty());
  CHECK(after.reply.data().empty());
  CHECK(c6.server_initial_metadata().empty());
  CHECK(c6.server_trailing_metadata() == metadata{{"count", "0"}});

  // Metadata beyond the limits (64 entries, 8 KiB by default) is refused before it is parsed, on
  // the server for requests and on the client for responses; the connection carries on.
  client_context many;
  for (int i = 0; i < 65; ++i) many.add_metadata("k" + std::to_string(i), "");
  CHECK(code_of(call(*ch, test_service::meta, make_request(""), &many)) == status_code::resource_exhausted);
  CHECK(many.status_message().find("more than 64 entries") != std::string::npos);
  client_context large;
  large.add_metadata("big", std::string(9000, 'x'));
  CHECK(code_of(call(*ch, test_service::meta, make_request(""), &large)) == status_code::resource_exhausted);
  CHECK(large.status_message().find("larger than 8192 bytes") != std::string::npos);
  client_context flooded;
  CHECK(code_of(call(*ch, test_service::meta, make_request("flood"), &flooded)) ==
        status_code::resource_exhausted);
  CHECK(flooded.status_message().find("beyond the channel's limits") != std::string::npos);
  client_context flooded_error;  // an error status survives its oversized metadata
  CHECK(code_of(call(*ch, test_service::meta, make_request("flood and fail"), &flooded_error)) ==
        status_code::aborted);

  // None of the failures above broke the connection.
  CHECK_FALSE(call(*ch, test_service::echo, make_request("still fine")).ec);
  CHECK(ch->stats().connects == 1);
}

TEST_CASE("e2e: max_in_flight bounds calls on the wire and the wait queue, beyond it RESOURCE_EXHAUSTED",
          "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  channel_options o;
  o.max_in_flight = 2;
  o.max_queued_calls = 3;
  auto ch = h.make_channel(o);
  REQUIRE_FALSE(call(*ch, test_service::echo, make_request("warm up")).ec);  // connected
  std::vector<std::future<call_result>> calls;
  for (int i = 0; i < 5; ++i)
    calls.push_back(
        start_call(*ch, test_service::sleep, make_request(std::to_string(i), test_service::until_released)));
  // Two run (held until released), three wait in the queue: the sixth is refused at once.
  REQUIRE(h.service().wait_for([&] { return h.service().sleeps_started.load() == 2; }));
  const auto refused = call(*ch, test_service::echo, make_request("one too many"));
  CHECK(code_of(refused) == status_code::resource_exhausted);
  h.service().release_held();
  for (int i = 0; i < 5; ++i) {
    REQUIRE(calls[i].wait_for(30s) == std::future_status::ready);
    const auto r = calls[i].get();
    CHECK_FALSE(r.ec);
    CHECK(r.reply.data() == std::to_string(i));
  }
  CHECK(h.service().max_concurrent.load() == 2);
  CHECK(h.service().sleeps_finished.load() == 5);
}

TEST_CASE("e2e: the server's per-connection in-flight bound answers RESOURCE_EXHAUSTED", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  server_options so;
  so.max_in_flight_per_connection = 2;
  e2e_harness h(target, so);
  auto ch = h.make_channel();
  auto a = start_call(*ch, test_service::sleep, make_request("a", test_service::until_released));
  auto b = start_call(*ch, test_service::sleep, make_request("b", test_service::until_released));
  REQUIRE(h.service().wait_for([&] { return h.service().sleeps_started.load() == 2; }));
  client_context ctx;
  CHECK(code_of(call(*ch, test_service::echo, make_request("c"), &ctx)) == status_code::resource_exhausted);
  CHECK_FALSE(ctx.status_message().empty());
  h.service().release_held();
  REQUIRE(a.wait_for(30s) == std::future_status::ready);
  REQUIRE(b.wait_for(30s) == std::future_status::ready);
  CHECK_FALSE(a.get().ec);
  CHECK_FALSE(b.get().ec);
}

TEST_CASE("e2e: graceful shutdown drains in-flight calls, then refuses new ones", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  auto slow = start_call(*ch, test_service::sleep, make_request("drain me", test_service::until_released));
  REQUIRE(h.service().wait_for([&] { return h.service().sleeps_started.load() == 1; }));
  auto shut = std::async(std::launch::async, [&] { return h.shutdown(30s, 60s); });
  // The shutdown waits for the held call (how long it is watched here proves nothing on a slow
  // machine, but a shutdown that did not wait fails this on any normal one).
  CHECK(shut.wait_for(200ms) == std::future_status::timeout);
  CHECK(h.service().sleeps_finished.load() == 0);
  h.service().release_held();
  REQUIRE(shut.get());
  // Shutdown completed only after the in-flight handler had run to its end, uncancelled.
  CHECK(h.service().sleeps_finished.load() == 1);
  CHECK(h.service().sleeps_cancelled.load() == 0);
  REQUIRE(slow.wait_for(10s) == std::future_status::ready);
  const auto r = slow.get();
  CHECK_FALSE(r.ec);
  CHECK(r.reply.data() == "drain me");
  CHECK(code_of(call(*ch, test_service::echo, make_request("late"))) == status_code::unavailable);
}

TEST_CASE("e2e: shutdown grace expiry cancels handlers and fails their calls UNAVAILABLE", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  auto stuck = start_call(*ch, test_service::sleep, make_request("stuck", 60000));
  REQUIRE(h.service().wait_for([&] { return h.service().sleeps_started.load() == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(h.shutdown(200ms));
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  REQUIRE(stuck.wait_for(10s) == std::future_status::ready);
  CHECK(code_of(stuck.get()) == status_code::unavailable);
  CHECK(h.service().wait_for([&] { return h.service().sleeps_cancelled.load() == 1; }));
}

TEST_CASE(
    "e2e: the connection dying fails every pending call and stream UNAVAILABLE - a URI channel reconnects",
    "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  if (target == "loopback") {
    e2e_harness h(target);
    // The server's first message breaks the link (a crash seen from the client).
    transport::loopback::loopback_faults s2c;
    s2c.close_at = 1;
    auto ch = h.make_channel({}, {}, s2c);
    std::vector<std::future<call_result>> calls;
    for (int i = 0; i < 8; ++i)
      calls.push_back(start_call(*ch, test_service::sleep, make_request("s", 60000)));
    REQUIRE(h.service().wait_for([&] { return h.service().sleeps_started.load() == 8; }));
    auto trigger = start_call(*ch, test_service::echo, make_request("reply breaks the link"));
    for (auto& f : calls) {
      REQUIRE(f.wait_for(10s) == std::future_status::ready);
      CHECK(code_of(f.get()) == status_code::unavailable);
    }
    REQUIRE(trigger.wait_for(10s) == std::future_status::ready);
    CHECK(code_of(trigger.get()) == status_code::unavailable);
    // A channel over a given connection does not reconnect.
    CHECK(code_of(call(*ch, test_service::echo, make_request("x"))) == status_code::unavailable);
    CHECK(h.service().wait_for([&] { return h.service().sleeps_cancelled.load() == 8; }));
    return;
  }
  // A real server process, killed with SIGKILL while calls are in flight.
  std::uint16_t port = 0;
  const pid_t child = fork_server(target, port);
  REQUIRE(child > 0);
  std::string uri = listen_uri(target);
  uri = uri.substr(0, uri.rfind(':') + 1) + std::to_string(port);
  {
    io_thread client;
    auto ch = channel::create(client.executor(), uri, with_relaxed_liveness(channel_options{}));
    REQUIRE_FALSE(call(*ch, test_service::echo, make_request("hello")).ec);
    std::vector<std::future<call_result>> calls;
    for (int i = 0; i < 8; ++i)
      calls.push_back(start_call(*ch, test_service::sleep, make_request("s", 60000)));
    // An open stream too: it fails UNAVAILABLE with the calls.
    client_stream<EchoRequest, EchoReply> stream(ch->start_stream(test_service::chat, nullptr, nullptr));
    auto stream_end = std::make_shared<std::promise<boost::system::error_code>>();
    auto stream_ended = stream_end->get_future();
    stream.async_finish([stream_end](boost::system::error_code ec) { stream_end->set_value(ec); });
    // The connection is ordered: once this reply is here, the server has all 8 sleeps running.
    REQUIRE_FALSE(call(*ch, test_service::echo, make_request("barrier")).ec);
    REQUIRE(::kill(child, SIGKILL) == 0);
    int wstatus = 0;
    REQUIRE(::waitpid(child, &wstatus, 0) == child);
    REQUIRE(stream_ended.wait_for(15s) == std::future_status::ready);
    CHECK(to_status_code(stream_ended.get()) == status_code::unavailable);
    for (auto& f : calls) {
      REQUIRE(f.wait_for(15s) == std::future_status::ready);
      const auto r = f.get();
      CHECK(code_of(r) == status_code::unavailable);
    }
    // The next call fails UNAVAILABLE: it reconnects (the server closed cleanly) or fails fast
    // (the connection was lost: the endpoint is in its backoff); nobody listens any more.
    client_context ctx;
    CHECK(code_of(call(*ch, test_service::echo, make_request("anyone?"), &ctx)) == status_code::unavailable);
    CHECK(ch->stats().connects == 1);
    // A new server on the same port: a wait_for_ready call rides the reconnect, through the backoff.
    std::uint16_t port2 = port;
    const pid_t child2 = fork_server(target, port2);
    REQUIRE(child2 > 0);
    CHECK(port2 == port);
    client_context ready;
    ready.set_wait_for_ready(true);
    ready.set_timeout(30s);
    CHECK_FALSE(call(*ch, test_service::echo, make_request("back"), &ready).ec);
    CHECK(ch->state() == channel_state::ready);
    CHECK(ch->stats().connects == 2);
    ch.reset();
    ::kill(child2, SIGKILL);
    REQUIRE(::waitpid(child2, &wstatus, 0) == child2);
    CHECK(client.drain());
  }
}

// Not a test: the body of the server process fork_server() starts (hidden from normal runs).
TEST_CASE("e2e-helper: serve", "[.]") {
  const char* uri = std::getenv("RDMARPC_TEST_SERVE_URI");
  const char* fd = std::getenv("RDMARPC_TEST_SERVE_FD");
  REQUIRE(uri != nullptr);
  REQUIRE(fd != nullptr);
  const int out = std::atoi(fd);
  boost::asio::io_context io;
  test_service svc;
  rdmarpc::server srv(io.get_executor(), with_relaxed_liveness(server_options{}));
  srv.add_service(svc);
  std::uint16_t bound = 0;
  try {
    bound = srv.listen(uri).port;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "e2e-helper: cannot listen on %s: %s\n", uri, e.what());
  }
  REQUIRE(::write(out, &bound, sizeof bound) == static_cast<ssize_t>(sizeof bound));
  ::close(out);
  REQUIRE(bound != 0);
  io.run();  // until killed
}

TEST_CASE("e2e: a URI channel connects lazily and reconnects after the server side closed it", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  if (target == "loopback") return;  // loopback channels are made over a given connection
  io_thread client;
  std::string uri;
  {
    e2e_harness h(target);
    uri = h.uri();
    auto ch = h.make_channel();
    CHECK(ch->stats().connects == 0);
    REQUIRE_FALSE(call(*ch, test_service::echo, make_request("1")).ec);
    CHECK(ch->stats().connects == 1);
    ch->close();
    CHECK(code_of(call(*ch, test_service::echo, make_request("2"))) == status_code::unavailable);
  }
  // Nothing listens on the URI any more: connecting fails every waiting call UNAVAILABLE.
  auto ch = channel::create(client.executor(), uri);
  client_context ctx;
  auto a = start_call(*ch, test_service::echo, make_request("a"), &ctx);
  auto b = start_call(*ch, test_service::echo, make_request("b"));
  REQUIRE(a.wait_for(20s) == std::future_status::ready);
  REQUIRE(b.wait_for(20s) == std::future_status::ready);
  CHECK(code_of(a.get()) == status_code::unavailable);
  CHECK(code_of(b.get()) == status_code::unavailable);
  CHECK(ctx.status_message().find("cannot connect") != std::string::npos);
  ch.reset();
  CHECK(client.drain());
}

TEST_CASE("e2e: a malformed frame closes only that connection - other clients carry on", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto good = h.make_channel();
  REQUIRE_FALSE(call(*good, test_service::echo, make_request("before")).ec);
  auto slow = start_call(*good, test_service::sleep,
                         make_request("across the incident", test_service::until_released));
  REQUIRE(h.service().wait_for([&] { return h.service().sleeps_started.load() == 1; }));

  if (target == "loopback") {
    transport::loopback::loopback_faults c2s;
    c2s.corrupt_at = 2;  // the second request arrives with every byte inverted
    auto bad = h.make_channel({}, c2s);
    REQUIRE_FALSE(call(*bad, test_service::echo, make_request("first is fine")).ec);
    client_context ctx;
    CHECK(code_of(call(*bad, test_service::echo, make_request("garbled"), &ctx)) == status_code::unavailable);
  } else if (target == "rdma") {
    // A transport-level client (no rpc channel) sends one message that is no rpc frame.
    struct watcher final : transport::connection_handler {
      std::optional<boost::system::error_code> closed;
      void on_message(transport::received_message) override {}
      void on_close(const boost::system::error_code& reason) override { closed = reason; }
    };
    boost::asio::io_context io;
    const auto ep = transport::parse_endpoint(h.uri());
    REQUIRE(ep.has_value());
    std::shared_ptr<transport::connection> raw;
    boost::system::error_code connect_ec;
    bool connected = false;
    transport::async_connect(io.get_executor(), *ep, {},
                             [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                               connect_ec = ec;
                               raw = std::move(c);
                               connected = true;
                             });
    io.run_for(20s);
    REQUIRE(connected);
    REQUIRE_FALSE(connect_ec);
    auto w = std::make_shared<watcher>();
    raw->start(w);
    const std::array<unsigned char, 16> garbage{0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB,
                                                0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB};
    REQUIRE_FALSE(raw->send_copy(boost::asio::buffer(garbage)));
    io.restart();
    for (int i = 0; i < 200 && !w->closed; ++i) io.run_for(100ms);
    REQUIRE(w->closed.has_value());
    // The server closed it on purpose (a graceful close, not a crash).
    CHECK(*w->closed == transport::errc::closed_by_peer);
    raw.reset();
    io.restart();
    io.run_for(200ms);  // let the connection finish tearing down on this io_context
  } else {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket sock(io);
    const auto port = static_cast<std::uint16_t>(std::stoi(h.uri().substr(h.uri().rfind(':') + 1)));
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    // A valid tcp length prefix (16, little-endian) followed by 16 bytes that are no rpc frame.
    std::array<unsigned char, 20> garbage{};
    garbage[0] = 16;
    std::fill(garbage.begin() + 4, garbage.end(), 0xAB);
    boost::asio::write(sock, boost::asio::buffer(garbage));
    // The server must close the socket: reading (its goodbye, if any) ends with eof / reset,
    // bounded by run_for.
    std::array<char, 64> buf;
    boost::system::error_code read_ec;
    bool done = false;
    std::function<void()> read_more = [&] {
      sock.async_read_some(boost::asio::buffer(buf), [&](boost::system::error_code ec, std::size_t) {
        if (!ec) return read_more();
        read_ec = ec;
        done = true;
      });
    };
    read_more();
    io.run_for(10s);
    REQUIRE(done);
    CHECK((read_ec == boost::asio::error::eof || read_ec == boost::asio::error::connection_reset));
  }
  // The other client's connection and its in-flight call (held until now) were not affected.
  CHECK(slow.wait_for(0s) == std::future_status::timeout);
  h.service().release_held();
  REQUIRE(slow.wait_for(30s) == std::future_status::ready);
  CHECK_FALSE(slow.get().ec);
  CHECK_FALSE(call(*good, test_service::echo, make_request("after")).ec);
  auto fresh = h.make_channel();
  CHECK_FALSE(call(*fresh, test_service::echo, make_request("new client")).ec);
}

TEST_CASE("e2e: p50 latency of a 64 B echo (printed, not asserted)", "[e2e][latency]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  constexpr int kWarmup = 200;
  constexpr int kCalls = 5000;
  const auto req = make_request(std::string(64, 'x'));
  std::promise<std::vector<std::chrono::nanoseconds>> p;
  auto f = p.get_future();
  boost::asio::co_spawn(
      h.client_executor(),
      [&]() -> boost::asio::awaitable<void> {
        std::vector<std::chrono::nanoseconds> samples;
        samples.reserve(kCalls);
        for (int i = 0; i < kWarmup + kCalls; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          auto reply = co_await async_unary_call<EchoReply>(*ch, test_service::echo, nullptr, req,
                                                            boost::asio::use_awaitable);
          if (i >= kWarmup) samples.push_back(std::chrono::steady_clock::now() - t0);
          if (reply.data().size() != 64) throw std::runtime_error("short reply");
        }
        p.set_value(std::move(samples));
      },
      [&p](std::exception_ptr e) {
        if (e) p.set_exception(e);
      });
  const auto t_start = std::chrono::steady_clock::now();
  REQUIRE(f.wait_for(300s) == std::future_status::ready);
  const auto total = std::chrono::steady_clock::now() - t_start;
  auto samples = f.get();
  REQUIRE(samples.size() == kCalls);
  std::sort(samples.begin(), samples.end());
  const auto us = [](std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1000.0; };
  // The mean is printed too: under a coarse clock (TCG guests tick at 4 ms) per-call samples are
  // quantised, while the mean over the whole run (warm-up included) is not.
  std::printf("rdmarpc latency %-8s 64 B echo, %d sequential calls: p50 %.1f us, p99 %.1f us, mean %.1f us\n",
              target.c_str(), kCalls, us(samples[kCalls / 2]), us(samples[kCalls * 99 / 100]),
              us(std::chrono::duration_cast<std::chrono::nanoseconds>(total)) / (kWarmup + kCalls));
  std::fflush(stdout);
}

TEST_CASE("e2e: calls started from many threads at once are all answered", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  constexpr int kThreads = 4;
  constexpr int kPerThread = 250;
  std::vector<std::future<int>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&ch, t] {
      std::vector<std::pair<std::string, std::future<EchoReply>>> calls;
      for (int i = 0; i < kPerThread; ++i) {
        auto data = std::to_string(t) + "/" + std::to_string(i);
        calls.emplace_back(data, async_unary_call<EchoReply>(*ch, test_service::echo, nullptr,
                                                             make_request(data), boost::asio::use_future));
      }
      int ok = 0;
      for (auto& [data, f] : calls) {
        if (f.wait_for(60s) == std::future_status::ready && f.get().data() == data) ++ok;
      }
      return ok;
    }));
  }
  for (auto& w : workers) {
    REQUIRE(w.wait_for(120s) == std::future_status::ready);
    CHECK(w.get() == kPerThread);
  }
}

TEST_CASE("e2e: a server running its own io_context threads serves many connections", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  server_options so;
  so.threads = 2;
  e2e_harness h(target, so);
  std::vector<std::shared_ptr<channel>> channels;
  for (int i = 0; i < 4; ++i) channels.push_back(h.make_channel());
  std::vector<std::future<call_result>> calls;
  for (int round = 0; round < 50; ++round) {
    for (std::size_t i = 0; i < channels.size(); ++i) {
      calls.push_back(
          start_call(*channels[i], test_service::echo, make_request(std::to_string(round * 10 + i))));
    }
  }
  int ok = 0;
  for (std::size_t k = 0; k < calls.size(); ++k) {
    REQUIRE(calls[k].wait_for(30s) == std::future_status::ready);
    const auto r = calls[k].get();
    if (!r.ec && r.reply.data() == std::to_string((k / 4) * 10 + k % 4)) ++ok;
  }
  CHECK(ok == 200);
  // Deadlines and cancellation work on the server's own threads too.
  client_context ctx;
  ctx.set_timeout(2s);  // long enough for the request to reach the handler on a slow machine
  CHECK(code_of(call(*channels[0], test_service::sleep, make_request("z", 20000), &ctx)) ==
        status_code::deadline_exceeded);
  CHECK(h.service().wait_for([&] { return h.service().sleeps_cancelled.load() == 1; }));
}

TEST_CASE(
    "e2e: a connection beyond the server's max_registered_memory is refused - the one inside it "
    "carries on, and the next gets in once it closed",
    "[e2e][limits]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  server_options so;
  so.max_registered_memory = 3u << 20;  // one connection's rings (2 MiB with the defaults), not two
  e2e_harness h(target, so);
  auto first = h.make_channel();
  REQUIRE_FALSE(call(*first, test_service::echo, make_request("first")).ec);
  auto second = h.make_channel();
  client_context ctx;
  const auto refused = call(*second, test_service::echo, make_request("second"), &ctx);
  if (target == "rdma") {
    CHECK(code_of(refused) == status_code::unavailable);
    CHECK_THAT(ctx.status_message(), Catch::Contains("registered memory exhausted"));
  } else {
    CHECK_FALSE(refused.ec);  // tcp and loopback register no memory: the bound does not apply
  }
  for (int i = 0; i < 5; ++i) CHECK_FALSE(call(*first, test_service::echo, make_request("during")).ec);
  // Once the first connection is gone its rings are returned, and the second channel gets in on a
  // later attempt (after its reconnect backoff).
  first->close();
  client_context patient;
  patient.set_wait_for_ready(true);
  patient.set_timeout(30s);
  const auto r = call(*second, test_service::echo, make_request("later"), &patient, 40s);
  CHECK_FALSE(r.ec);
  CHECK(r.reply.data() == "later");
}

TEST_CASE("e2e: a request larger than the maximum message size fails RESOURCE_EXHAUSTED locally", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  channel_options o;
  o.transport.max_message_size = 64 << 10;
  auto ch = h.make_channel(o);
  client_context ctx;
  CHECK(code_of(call(*ch, test_service::echo, make_request(std::string(100 << 10, 'b')), &ctx)) ==
        status_code::resource_exhausted);
  CHECK_FALSE(ctx.status_message().empty());
  const auto r = call(*ch, test_service::echo, make_request(std::string(60 << 10, 's')));
  CHECK_FALSE(r.ec);
  CHECK(r.reply.data().size() == (60u << 10));
}

// A call with metadata is queued (its extras are encoded first) and reserved before its header is
// written: the reservation must be what the header can take, not the largest header there is.
TEST_CASE("e2e: a request with metadata that exactly fills the maximum message size is sent", "[e2e]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  channel_options o;
  o.transport.max_message_size = 64 << 10;
  auto ch = h.make_channel(o);
  const metadata md{{"k", "v"}};
  const std::size_t frame_without_payload =
      frame::kCompactRequestSize + 4 + extras::encode_request(md).size();  // no deadline
  auto request_of = [&](std::size_t frame_size) {
    std::string data(frame_size - frame_without_payload - 4, 'm');  // tag + 3-byte length
    auto r = make_request(std::move(data));
    REQUIRE(frame_without_payload + r.ByteSizeLong() == frame_size);
    return r;
  };
  client_context fits;
  for (const auto& [k, v] : md) fits.add_metadata(k, v);
  const auto r = call(*ch, test_service::echo, request_of(o.transport.max_message_size), &fits);
  CHECK_FALSE(r.ec);
  CHECK(r.reply.data().size() == o.transport.max_message_size - frame_without_payload - 4);
  client_context one_more;
  for (const auto& [k, v] : md) one_more.add_metadata(k, v);
  CHECK(code_of(call(*ch, test_service::echo, request_of(o.transport.max_message_size + 1), &one_more)) ==
        status_code::resource_exhausted);
}

TEST_CASE("e2e: loopback transport back-pressure (no send room) holds calls until the peer reads", "[e2e]") {
  if (e2e_targets().front() != "loopback") return;
  e2e_harness h("loopback");
  transport::loopback::loopback_options lo;
  lo.capacity = 4;
  lo.connection.send_queue_bytes = 4 * 40;  // about four requests
  auto [client_end, server_end] =
      transport::loopback::make_loopback_pair(h.client_executor(), h.server_executor(), lo);
  auto ch = channel::create(client_end);
  std::vector<std::future<call_result>> calls;
  for (int i = 0; i < 40; ++i)
    calls.push_back(start_call(*ch, test_service::echo, make_request(std::to_string(i))));
  // Let the channel process every submit (its executor is FIFO): the peer is not started, so the
  // transport's queue is full and the rest waits in the channel.
  std::promise<void> flushed;
  boost::asio::post(h.client_executor(), [&] { flushed.set_value(); });
  REQUIRE(flushed.get_future().wait_for(10s) == std::future_status::ready);
  CHECK(calls.back().wait_for(0s) == std::future_status::timeout);
  h.server().serve(server_end);
  for (int i = 0; i < 40; ++i) {
    REQUIRE(calls[i].wait_for(30s) == std::future_status::ready);
    const auto r = calls[i].get();
    CHECK_FALSE(r.ec);
    CHECK(r.reply.data() == std::to_string(i));
  }
}

// Heartbeats (docs/wire-format.md, Heartbeats) on every target, rdma included: a healthy idle
// connection exchanges pings and pongs for many intervals and stays up (on rdma each ping costs a
// credit like any message).
TEST_CASE("e2e: heartbeats keep a healthy idle connection up", "[e2e][heartbeat]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  server_options so;
  so.heartbeat_interval = 20ms;
  so.heartbeat_timeout = 5s;  // generous: a loaded machine (sanitizers, TCG) must not look dead
  so.min_ping_interval_allowed = 10ms;
  e2e_harness h(target, so);
  channel_options co;
  co.heartbeat_interval = 20ms;
  co.heartbeat_timeout = 5s;
  auto ch = h.make_channel(co);
  REQUIRE_FALSE(call(*ch, test_service::echo, make_request("up")).ec);
  // Polled from the test thread (the channel runs on its io thread); bounded.
  const auto until = std::chrono::steady_clock::now() + 30s;
  auto exchanges = [&] { return ch->stats().pings_sent + ch->stats().pings_received; };
  while (exchanges() < 30 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  CHECK(exchanges() >= 30);
  const auto c = ch->stats();
  const auto s = h.server().stats();
  CHECK(c.heartbeat_timeouts == 0);
  CHECK(s.heartbeat_timeouts == 0);
  CHECK(s.too_many_pings == 0);
  CHECK(c.pongs_received + 1 >= c.pings_sent);
  REQUIRE_FALSE(call(*ch, test_service::echo, make_request("still up")).ec);
  CHECK(ch->stats().connects == 1);
}

// A hung host: the server process is stopped (SIGSTOP), its kernel (and on rdma its NIC) still
// acknowledges at the transport level, so only the heartbeat notices. A call with no deadline
// fails UNAVAILABLE instead of waiting forever.
TEST_CASE("e2e: a stopped server process is detected by heartbeats", "[e2e][heartbeat]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  if (target == "loopback") return;  // needs a server in another process
  std::uint16_t port = 0;
  const pid_t child = fork_server(target, port);
  REQUIRE(child > 0);
  io_thread client;
  std::string uri = listen_uri(target);
  uri = uri.substr(0, uri.rfind(':') + 1) + std::to_string(port);
  channel_options co;
  // Short enough to detect in about a second, long enough for a freshly started (sanitized,
  // emulated) server process to answer the first call while it checks itself.
  co.heartbeat_interval = 100ms;
  co.heartbeat_timeout = 1s;
  auto ch = channel::create(client.executor(), uri, co);
  REQUIRE_FALSE(call(*ch, test_service::echo, make_request("alive")).ec);
  REQUIRE(::kill(child, SIGSTOP) == 0);
  client_context ctx;  // no deadline
  const auto r = call(*ch, test_service::echo, make_request("hung?"), &ctx);
  CHECK(code_of(r) == status_code::unavailable);
  CHECK(ctx.status_message().find("connection lost") != std::string::npos);
  CHECK(ch->stats().heartbeat_timeouts == 1);
  ::kill(child, SIGKILL);
  ::kill(child, SIGCONT);
  int wstatus = 0;
  REQUIRE(::waitpid(child, &wstatus, 0) == child);
  ch.reset();
  CHECK(client.drain());
}
