// Interceptor chains (rpc/interceptor.hpp) over loopback and tcp: order of the hooks, metadata
// they add on either side, refusals (the handler never runs, the call ends with the verdict,
// the hooks asked see the end), what on_call_end is told (status, bytes) for unary calls, streams,
// unknown methods, deadlines and exceptions; and the built-in metrics (server_options::metrics)
// and connection figures the server reports.
#include "rpc/interceptor.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "e2e_harness.hpp"
#include "rpc/stream.hpp"

using namespace rdmarpc;
using namespace rdmarpc::test;
using namespace std::chrono_literals;

namespace {

// What one hook call saw (copies: the views die with the call).
struct event {
  std::string who;  // "<name>.start" / "<name>.end"
  std::string method;
  bool stream = false;
  status_code code = status_code::ok;
  std::string message;
  std::size_t request_bytes = 0, response_bytes = 0;
  metadata md;
};

struct journal {
  std::mutex mutex;
  std::vector<event> events;
  void add(event e) {
    std::lock_guard lock(mutex);
    events.push_back(std::move(e));
  }
  std::vector<event> snapshot() {
    std::lock_guard lock(mutex);
    return events;
  }
  std::vector<std::string> order() {
    std::vector<std::string> out;
    for (const auto& e : snapshot()) out.push_back(e.who);
    return out;
  }
  // Waits (bounded) until `n` events were recorded: a server's end hooks run on its thread, after
  // the client may already have its answer.
  bool wait_for(std::size_t n) {
    for (int i = 0; i < 2000; ++i) {
      if (snapshot().size() >= n) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
};

// A server interceptor that records its calls, adds "x-<name>" initial metadata, and refuses
// calls whose metadata has "refuse-by" = its name.
class recording_server_interceptor final : public server_interceptor {
 public:
  recording_server_interceptor(std::string name, journal& j) : name_(std::move(name)), journal_(j) {}
  call_verdict on_call_start(const call_info& call, metadata& initial) override {
    journal_.add(
        {name_ + ".start", std::string(call.method), call.stream, status_code::ok, "", 0, 0, call.metadata});
    initial.emplace_back("x-" + name_, "1");
    for (const auto& [k, v] : call.metadata)
      if (k == "refuse-by" && v == name_) return {status_code::permission_denied, name_ + " says no"};
    if (throws_) throw std::runtime_error(name_ + " broke");
    return {};
  }
  void on_call_end(const call_info& call, const call_outcome& o) override {
    journal_.add({name_ + ".end",
                  std::string(call.method),
                  call.stream,
                  o.code,
                  std::string(o.message),
                  o.request_bytes,
                  o.response_bytes,
                  {}});
  }
  bool throws_ = false;

 private:
  std::string name_;
  journal& journal_;
};

class recording_client_interceptor final : public client_interceptor {
 public:
  recording_client_interceptor(std::string name, journal& j) : name_(std::move(name)), journal_(j) {}
  call_verdict on_call_start(const client_call_info& call, metadata& added) override {
    journal_.add({name_ + ".start", std::string(call.method.full_name), call.stream, status_code::ok, "", 0,
                  0, call.context ? call.context->request_metadata() : metadata{}});
    added.emplace_back("added-by", name_);
    if (call.context != nullptr)
      for (const auto& [k, v] : call.context->request_metadata())
        if (k == "client-refuse-by" && v == name_)
          return {status_code::failed_precondition, name_ + " refused"};
    return {};
  }
  void on_call_end(const client_call_info& call, const call_outcome& o) override {
    journal_.add({name_ + ".end",
                  std::string(call.method.full_name),
                  call.stream,
                  o.code,
                  std::string(o.message),
                  o.request_bytes,
                  o.response_bytes,
                  {}});
  }

 private:
  std::string name_;
  journal& journal_;
};

std::vector<std::string> values_of(const metadata& md, std::string_view key) {
  std::vector<std::string> out;
  for (const auto& [k, v] : md)
    if (k == key) out.push_back(v);
  return out;
}

// Opens Chat, writes "a" and "b" reading each echo, finishes; the status.
status_code chat(e2e_harness& h, std::shared_ptr<channel> ch, client_context& ctx) {
  auto body = [](std::shared_ptr<channel> ch, client_context& ctx) -> boost::asio::awaitable<status_code> {
    constexpr auto tuple_awaitable = boost::asio::as_tuple(boost::asio::use_awaitable);
    client_stream<EchoRequest, EchoReply> s(ch->start_stream(test_service::chat, &ctx, nullptr));
    EchoRequest req;
    EchoReply reply;
    for (const char* m : {"a", "b"}) {
      req.set_data(m);
      auto [wec] = co_await s.async_write(req, tuple_awaitable);
      if (wec) break;
      auto [rec] = co_await s.async_read(reply, tuple_awaitable);
      if (rec) break;
    }
    auto [dec] = co_await s.async_writes_done(tuple_awaitable);
    (void)dec;
    for (;;) {
      auto [rec] = co_await s.async_read(reply, tuple_awaitable);
      if (rec) break;
    }
    auto [ec] = co_await s.async_finish(tuple_awaitable);
    co_return to_status_code(ec);
  };
  auto fut = boost::asio::co_spawn(h.client_executor(), body(std::move(ch), ctx), boost::asio::use_future);
  REQUIRE(fut.wait_for(60s) == std::future_status::ready);
  return fut.get();
}

}  // namespace

TEST_CASE("interceptors: server chain runs in order, adds metadata, sees each call's outcome",
          "[interceptor]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  journal j;
  server_options options;
  options.interceptors = {std::make_shared<recording_server_interceptor>("a", j),
                          std::make_shared<recording_server_interceptor>("b", j)};
  e2e_harness h(target, options);
  auto ch = h.make_channel();

  client_context ctx;
  ctx.add_metadata("k", "v");
  const auto req = make_request("hello");
  auto r = call(*ch, test_service::meta, req, &ctx);
  REQUIRE_FALSE(r.ec);
  REQUIRE(j.wait_for(4));
  CHECK(j.order() == std::vector<std::string>{"a.start", "b.start", "b.end", "a.end"});
  const auto ev = j.snapshot();
  CHECK(ev[0].method == "/rdmarpc.test.Test/Metadata");
  CHECK(values_of(ev[0].md, "k") == std::vector<std::string>{"v"});
  CHECK(ev[3].code == status_code::ok);
  CHECK(ev[3].request_bytes == req.ByteSizeLong());
  CHECK(ev[3].response_bytes == r.reply.ByteSizeLong());
  CHECK(ev[3].response_bytes > 0);
  // The interceptors' initial metadata, in chain order, before the handler's.
  const auto& initial = ctx.server_initial_metadata();
  REQUIRE(initial.size() >= 3);
  CHECK(initial[0] == std::pair<std::string, std::string>("x-a", "1"));
  CHECK(initial[1] == std::pair<std::string, std::string>("x-b", "1"));
  CHECK(initial[2].first == "echo-k");

  // A handler's error status is what the end hooks see.
  client_context fail_ctx;
  r = call(*ch, test_service::fail, make_request("x"), &fail_ctx);
  REQUIRE(r.ec);
  REQUIRE(j.wait_for(8));
  auto last = j.snapshot().back();
  CHECK(last.who == "a.end");
  CHECK(last.code == to_status_code(r.ec));
  CHECK(last.message == fail_ctx.status_message());

  // An unknown method is asked about too, with an empty name, and ends UNIMPLEMENTED.
  r = call(*ch, test_service::unknown, make_request("x"));
  CHECK(to_status_code(r.ec) == status_code::unimplemented);
  REQUIRE(j.wait_for(12));
  last = j.snapshot().back();
  CHECK(last.method.empty());
  CHECK(last.code == status_code::unimplemented);
}

TEST_CASE("interceptors: a server refusal skips the rest and the handler, the asked ones see the end",
          "[interceptor]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  journal j;
  server_options options;
  auto a = std::make_shared<recording_server_interceptor>("a", j);
  auto b = std::make_shared<recording_server_interceptor>("b", j);
  auto c = std::make_shared<recording_server_interceptor>("c", j);
  options.interceptors = {a, b, c};
  e2e_harness h(target, options);
  auto ch = h.make_channel();

  client_context ctx;
  ctx.add_metadata("refuse-by", "b");
  auto r = call(*ch, test_service::sleep, make_request("x", 1), &ctx);
  CHECK(to_status_code(r.ec) == status_code::permission_denied);
  CHECK(ctx.status_message() == "b says no");
  REQUIRE(j.wait_for(4));
  CHECK(j.order() == std::vector<std::string>{"a.start", "b.start", "b.end", "a.end"});
  CHECK(j.snapshot().back().code == status_code::permission_denied);
  CHECK(h.service().sleeps_started.load() == 0);

  // A stream refused the same way: reset with the verdict.
  client_context sctx;
  sctx.add_metadata("refuse-by", "a");
  CHECK(chat(h, ch, sctx) == status_code::permission_denied);
  CHECK(sctx.status_message() == "a says no");
  REQUIRE(j.wait_for(6));
  const auto ev = j.snapshot();
  CHECK(ev[4].who == "a.start");
  CHECK(ev[4].stream);
  CHECK(ev[5].who == "a.end");

  // An interceptor that throws refuses INTERNAL, and the connection carries on.
  c->throws_ = true;
  client_context tctx;
  r = call(*ch, test_service::echo, make_request("x"), &tctx);
  CHECK(to_status_code(r.ec) == status_code::internal);
  CHECK(tctx.status_message() == "interceptor threw: c broke");
  c->throws_ = false;
  CHECK_FALSE(call(*ch, test_service::echo, make_request("again")).ec);
}

TEST_CASE("interceptors: a stream's end hooks see its status and message bytes", "[interceptor]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  journal server_j, client_j;
  server_options options;
  options.interceptors = {std::make_shared<recording_server_interceptor>("s", server_j)};
  e2e_harness h(target, options);
  channel_options copts;
  copts.interceptors = {std::make_shared<recording_client_interceptor>("c", client_j)};
  auto ch = h.make_channel(copts);

  client_context ctx;
  REQUIRE(chat(h, ch, ctx) == status_code::ok);
  REQUIRE(server_j.wait_for(2));
  REQUIRE(client_j.wait_for(2));
  const auto s = server_j.snapshot();
  CHECK(s[1].who == "s.end");
  CHECK(s[1].stream);
  CHECK(s[1].code == status_code::ok);
  CHECK(s[1].request_bytes > 0);   // "a" and "b" as EchoRequests
  CHECK(s[1].response_bytes > 0);  // their echoes
  const auto c = client_j.snapshot();
  CHECK(c[1].who == "c.end");
  CHECK(c[1].stream);
  CHECK(c[1].code == status_code::ok);
  // Each side counts the same messages: what one sent the other received.
  CHECK(c[1].request_bytes == s[1].request_bytes);
  CHECK(c[1].response_bytes == s[1].response_bytes);
  // The client interceptor's metadata reached the stream's handler (echoed as initial metadata).
  CHECK(values_of(ctx.server_initial_metadata(), "echo-added-by") == std::vector<std::string>{"c"});
}

TEST_CASE("interceptors: client chain adds metadata, refuses before sending, sees outcomes",
          "[interceptor]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  journal j, server_j;
  server_options sopts;
  sopts.interceptors = {std::make_shared<recording_server_interceptor>("s", server_j)};
  e2e_harness h(target, sopts);
  channel_options options;
  options.interceptors = {std::make_shared<recording_client_interceptor>("one", j),
                          std::make_shared<recording_client_interceptor>("two", j)};
  auto ch = h.make_channel(options);

  // Metadata: the caller's first, then each interceptor's in order; a reused context does not
  // accumulate them.
  for (int round = 0; round < 2; ++round) {
    client_context ctx;
    ctx.add_metadata("mine", "1");
    const auto req = make_request("hi");
    auto r = call(*ch, test_service::meta, req, &ctx);
    REQUIRE_FALSE(r.ec);
    const auto& initial = ctx.server_initial_metadata();
    std::vector<std::string> echoed;
    for (const auto& [k, v] : initial)
      if (k.rfind("echo-", 0) == 0) echoed.push_back(k + "=" + v);
    CHECK(echoed == std::vector<std::string>{"echo-mine=1", "echo-added-by=one", "echo-added-by=two"});
    const auto ev = j.snapshot();
    REQUIRE(ev.size() == 4u * (round + 1));
    CHECK(ev[4 * round + 3].who == "one.end");
    CHECK(ev[4 * round + 3].code == status_code::ok);
    CHECK(ev[4 * round + 3].request_bytes == req.ByteSizeLong());
    CHECK(ev[4 * round + 3].response_bytes == r.reply.ByteSizeLong());
  }
  // Without a context of the caller's, the interceptors' metadata still goes out.
  auto r = call(*ch, test_service::meta, make_request("hi"));
  REQUIRE_FALSE(r.ec);

  // A refusal: the call fails with the verdict, nothing reaches the server.
  REQUIRE(server_j.wait_for(6));
  const auto server_seen = server_j.snapshot().size();
  client_context ctx;
  ctx.add_metadata("client-refuse-by", "one");
  const auto before = j.snapshot().size();
  r = call(*ch, test_service::echo, make_request("x"), &ctx);
  CHECK(to_status_code(r.ec) == status_code::failed_precondition);
  CHECK(ctx.status_message() == "one refused");
  const auto ev = j.snapshot();
  REQUIRE(ev.size() == before + 2);  // one.start, one.end: two was not asked
  CHECK(ev[before].who == "one.start");
  CHECK(ev[before + 1].who == "one.end");
  CHECK(ev[before + 1].code == status_code::failed_precondition);
  CHECK(server_j.snapshot().size() == server_seen);

  // A deadline that passes: the end hooks see DEADLINE_EXCEEDED.
  client_context dctx;
  dctx.set_timeout(50ms);
  r = call(*ch, test_service::sleep, make_request("x", 5000), &dctx);
  CHECK(to_status_code(r.ec) == status_code::deadline_exceeded);
  CHECK(j.snapshot().back().code == status_code::deadline_exceeded);
}

TEST_CASE("interceptors: built-in metrics count calls by method and status, with latency and bytes",
          "[interceptor][metrics]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  server_options options;
  options.metrics = true;
  e2e_harness h(target, options);
  auto ch = h.make_channel();

  const auto req = make_request("payload");
  std::size_t reply_bytes = 0;
  for (int i = 0; i < 5; ++i) {
    auto r = call(*ch, test_service::echo, req);
    REQUIRE_FALSE(r.ec);
    reply_bytes += r.reply.ByteSizeLong();
  }
  REQUIRE(call(*ch, test_service::fail, make_request("x")).ec);
  REQUIRE(call(*ch, test_service::unknown, make_request("x")).ec);

  // The server's end hooks run after the client has its answer: wait (bounded) for them.
  std::vector<method_stats> m;
  for (int i = 0; i < 2000; ++i) {
    m = h.server().method_metrics();
    std::uint64_t finished = 0;
    for (const auto& s : m) finished += s.finished_total();
    if (finished >= 7) break;
    std::this_thread::sleep_for(5ms);
  }
  const auto find = [&](std::string_view name) -> const method_stats* {
    for (const auto& s : m)
      if (s.name == name) return &s;
    return nullptr;
  };
  const auto* echo = find(test_service::echo.full_name);
  REQUIRE(echo != nullptr);
  CHECK(echo->started == 5);
  CHECK(echo->finished[static_cast<std::size_t>(status_code::ok)] == 5);
  CHECK(echo->in_flight() == 0);
  CHECK(echo->request_bytes == 5 * req.ByteSizeLong());
  CHECK(echo->response_bytes == reply_bytes);
  CHECK(echo->latency.count == 5);
  CHECK(echo->latency.percentile_us(0.5) >= 0);
  const auto* fail = find(test_service::fail.full_name);
  REQUIRE(fail != nullptr);
  CHECK(fail->finished_total() == 1);
  CHECK(fail->finished[static_cast<std::size_t>(status_code::ok)] == 0);
  const auto* unknown = find("");
  REQUIRE(unknown != nullptr);
  CHECK(unknown->finished[static_cast<std::size_t>(status_code::unimplemented)] == 1);
  // Every registered method has a row, called or not.
  CHECK(find(test_service::chat.full_name) != nullptr);

  // The connection's figures, read on its own thread.
  auto fut = h.server().async_connection_figures(boost::asio::use_future);
  REQUIRE(fut.wait_for(10s) == std::future_status::ready);
  const auto figures = fut.get();
  REQUIRE(figures.size() == 1);
  CHECK(figures[0].kind == target);
  CHECK(figures[0].calls_started == 7);
  CHECK(figures[0].calls_in_flight == 0);
  CHECK(figures[0].counters.messages_received >= 7);
  CHECK(figures[0].counters.messages_sent >= 7);
  CHECK(figures[0].counters.rnr_errors == 0);
}

// The metrics are not in the interceptor chain but run around it: they count what it refuses, and
// each call's response metadata is only what the chain added for that call.
TEST_CASE("interceptors: metrics with interceptors count refused calls and streams, metadata per call",
          "[interceptor][metrics]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  journal j;
  server_options options;
  options.metrics = true;
  options.interceptors = {std::make_shared<recording_server_interceptor>("a", j)};
  e2e_harness h(target, options);
  auto ch = h.make_channel();

  client_context refused;
  refused.add_metadata("refuse-by", "a");  // "a" adds its metadata, then refuses
  CHECK(to_status_code(call(*ch, test_service::echo, make_request("x"), &refused).ec) ==
        status_code::permission_denied);
  for (int i = 0; i < 2; ++i) {
    client_context ctx;
    REQUIRE_FALSE(call(*ch, test_service::echo, make_request("y"), &ctx).ec);
    CHECK(values_of(ctx.server_initial_metadata(), "x-a") == std::vector<std::string>{"1"});
  }
  client_context sctx;
  REQUIRE(chat(h, ch, sctx) == status_code::ok);
  // Refused after the interceptors said yes: their end and the metrics' are owed all the same.
  CHECK(to_status_code(call(*ch, test_service::unknown, make_request("z")).ec) == status_code::unimplemented);
  REQUIRE(j.wait_for(10));  // five starts and five ends

  std::vector<method_stats> m;
  const auto find = [&](std::string_view name) -> const method_stats* {
    for (const auto& s : m)
      if (s.name == name) return &s;
    return nullptr;
  };
  // The end hooks run on the server's thread, and a snapshot may catch one half-recorded (its
  // counters are separate atomics): bounded wait until every figure checked below is in.
  for (int i = 0; i < 2000; ++i) {
    m = h.server().method_metrics();
    const auto* chat_row = find(test_service::chat.full_name);
    const auto* unknown_row = find("");
    if (chat_row != nullptr && chat_row->finished_total() == 1 && chat_row->request_bytes > 0 &&
        unknown_row != nullptr && unknown_row->latency.count == 1)
      break;
    std::this_thread::sleep_for(5ms);
  }
  const auto* echo = find(test_service::echo.full_name);
  REQUIRE(echo != nullptr);
  CHECK(echo->started == 3);
  CHECK(echo->finished[static_cast<std::size_t>(status_code::permission_denied)] == 1);
  CHECK(echo->finished[static_cast<std::size_t>(status_code::ok)] == 2);
  CHECK(echo->latency.count == 3);
  CHECK(echo->in_flight() == 0);
  const auto* chat_row = find(test_service::chat.full_name);
  REQUIRE(chat_row != nullptr);
  CHECK(chat_row->started == 1);
  CHECK(chat_row->finished[static_cast<std::size_t>(status_code::ok)] == 1);
  CHECK(chat_row->request_bytes > 0);
  const auto* unknown = find("");
  REQUIRE(unknown != nullptr);
  CHECK(unknown->started == 1);
  CHECK(unknown->finished[static_cast<std::size_t>(status_code::unimplemented)] == 1);
  CHECK(unknown->latency.count == 1);
  const auto ev = j.snapshot();
  CHECK(std::count_if(ev.begin(), ev.end(), [](const event& e) {
          return e.who == "a.end" && e.code == status_code::unimplemented;
        }) == 1);
}

TEST_CASE("interceptors: metrics off means no per-method figures", "[interceptor][metrics]") {
  e2e_harness h("loopback");
  auto ch = h.make_channel();
  REQUIRE_FALSE(call(*ch, test_service::echo, make_request("x")).ec);
  CHECK(h.server().method_metrics().empty());
}
