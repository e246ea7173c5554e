// End-to-end streaming cases (gRPC's interop behaviours for streams), run over every target the
// binary lists (loopback and tcp on the host, rdma in the Soft-RoCE VM). Each client runs as a
// coroutine on the client's io thread; every wait is bounded.
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "e2e_harness.hpp"
#include "rpc/stream.hpp"
#include "tests/transport/raw_tcp.hpp"  // resident memory

using namespace rdmarpc;
using namespace rdmarpc::test;
using namespace std::chrono_literals;

namespace {

constexpr auto tuple_awaitable = boost::asio::as_tuple(boost::asio::use_awaitable);

template <typename T>
T run_client(e2e_harness& h, boost::asio::awaitable<T> body) {
  auto fut = boost::asio::co_spawn(h.client_executor(), std::move(body), boost::asio::use_future);
  REQUIRE(fut.wait_for(60s) == std::future_status::ready);
  return fut.get();
}

// Waits (bounded) until the server holds no call or stream on any connection: every handler it
// started has returned.
bool wait_until_server_idle(e2e_harness& h) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    auto figures = h.server().async_connection_figures(boost::asio::use_future);
    if (figures.wait_for(10s) != std::future_status::ready) return false;
    bool idle = true;
    for (const auto& c : figures.get()) idle = idle && c.calls_in_flight == 0;
    if (idle) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);  // polling the server's figures; nothing notifies
  }
}

struct stream_outcome {
  std::vector<std::size_t> sizes;  // of the messages read
  boost::system::error_code end;   // what ended the reads (eof, or the stream's error)
  status_code status = status_code::unknown;
  std::string message;
  metadata initial, trailing;
};

template <typename Stream>
boost::asio::awaitable<void> read_all(Stream& s, stream_outcome& out) {
  EchoReply reply;
  for (;;) {
    auto [ec] = co_await s.async_read(reply, tuple_awaitable);
    if (ec) {
      out.end = ec;
      break;
    }
    out.sizes.push_back(reply.data().size());
  }
}

template <typename Stream>
boost::asio::awaitable<void> finish(Stream& s, client_context& ctx, stream_outcome& out) {
  auto [ec] = co_await s.async_finish(tuple_awaitable);
  out.status = to_status_code(ec);
  out.message = ctx.status_message();
  out.initial = ctx.server_initial_metadata();
  out.trailing = ctx.server_trailing_metadata();
}

boost::asio::awaitable<stream_outcome> ticks(std::shared_ptr<channel> ch, StreamRequest req) {
  client_context ctx;
  ctx.add_metadata("who", "ticks");
  client_stream<StreamRequest, EchoReply> s(ch->start_stream(test_service::ticks, &ctx, &req));
  stream_outcome out;
  co_await read_all(s, out);
  co_await finish(s, ctx, out);
  co_return out;
}

boost::asio::awaitable<stream_outcome> sum(std::shared_ptr<channel> ch, std::vector<std::size_t> sizes) {
  client_context ctx;
  ctx.add_metadata("who", "sum");
  client_stream<EchoRequest, EchoReply> s(ch->start_stream(test_service::sum, &ctx, nullptr));
  stream_outcome out;
  EchoRequest req;
  for (std::size_t n : sizes) {
    req.set_data(std::string(n, 'x'));
    auto [ec] = co_await s.async_write(req, tuple_awaitable);
    if (ec) co_return out;
  }
  auto [ec] = co_await s.async_writes_done(tuple_awaitable);
  if (ec) co_return out;
  EchoReply reply;
  auto [rec] = co_await s.async_read(reply, tuple_awaitable);
  if (!rec) out.sizes.push_back(std::stoul(reply.data()));
  co_await read_all(s, out);
  co_await finish(s, ctx, out);
  co_return out;
}

// Writes each of `messages` and reads its echo before the next (ping-pong); then writes done.
boost::asio::awaitable<stream_outcome> ping_pong(std::shared_ptr<channel> ch,
                                                 std::vector<std::string> messages) {
  client_context ctx;
  ctx.add_metadata("who", "chat");
  ctx.add_metadata("x-grpc-test-echo-initial", "test_initial_metadata_value");
  ctx.add_metadata("x-grpc-test-echo-trailing-bin", std::string("\x0a\x0b\x0a\x0b\x0a\x0b", 6));
  client_stream<EchoRequest, EchoReply> s(ch->start_stream(test_service::chat, &ctx, nullptr));
  stream_outcome out;
  EchoRequest req;
  EchoReply reply;
  for (const auto& m : messages) {
    req.set_data(m);
    auto [wec] = co_await s.async_write(req, tuple_awaitable);
    if (wec) break;
    auto [rec] = co_await s.async_read(reply, tuple_awaitable);
    if (rec) {
      out.end = rec;
      break;
    }
    out.sizes.push_back(reply.data() == m ? m.size() : std::size_t{999999});
  }
  if (!out.end) {
    auto [ec] = co_await s.async_writes_done(tuple_awaitable);
    (void)ec;
    co_await read_all(s, out);
  }
  co_await finish(s, ctx, out);
  co_return out;
}

std::string value_of(const metadata& md, const std::string& key) {
  for (const auto& [k, v] : md)
    if (k == key) return v;
  return "<none>";
}

}  // namespace

TEST_CASE("e2e stream: server streaming sends every message then OK with metadata (interop server_streaming)",
          "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  StreamRequest req;
  for (std::uint32_t n : {31415u, 9u, 2653u, 58979u}) req.add_sizes(n);
  const auto out = run_client(h, ticks(ch, req));
  CHECK(out.sizes == std::vector<std::size_t>{31415, 9, 2653, 58979});
  CHECK(is_end_of_stream(out.end));
  CHECK(out.status == status_code::ok);
  CHECK(value_of(out.initial, "echo-who") == "ticks");
  CHECK(value_of(out.trailing, "count") == "4");
}

TEST_CASE("e2e stream: client streaming sums every message into one reply (interop client_streaming)",
          "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  const auto out = run_client(h, sum(ch, {27182, 8, 1828, 45904}));
  REQUIRE(out.sizes.size() == 1);
  CHECK(out.sizes[0] == 74922);
  CHECK(is_end_of_stream(out.end));
  CHECK(out.status == status_code::ok);
  CHECK(value_of(out.initial, "echo-who") == "sum");
  CHECK(value_of(out.trailing, "count") == "4");
}

TEST_CASE(
    "e2e stream: bidi ping pong and an empty stream with metadata (interop ping_pong and empty_stream and "
    "custom_metadata)",
    "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  const auto out = run_client(h, ping_pong(ch, {std::string(31415, 'a'), std::string(9, 'b'),
                                                std::string(2653, 'c'), std::string(58979, 'd')}));
  CHECK(out.sizes == std::vector<std::size_t>{31415, 9, 2653, 58979});
  CHECK(is_end_of_stream(out.end));
  CHECK(out.status == status_code::ok);
  CHECK(value_of(out.trailing, "count") == "4");
  CHECK(value_of(out.initial, "echo-who") == "chat");
  CHECK(value_of(out.initial, "echo-x-grpc-test-echo-initial") == "test_initial_metadata_value");
  CHECK(value_of(out.trailing, "x-grpc-test-echo-trailing-bin") ==
        std::string("\x0a\x0b\x0a\x0b\x0a\x0b", 6));

  const auto empty = run_client(h, ping_pong(ch, {}));
  CHECK(empty.sizes.empty());
  CHECK(is_end_of_stream(empty.end));
  CHECK(empty.status == status_code::ok);
  CHECK(value_of(empty.trailing, "count") == "0");
}

TEST_CASE(
    "e2e stream: a handler's status and non-ASCII message reach the client (interop status_code_and_message)",
    "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  StreamRequest req;
  req.set_count(2);
  req.set_size(10);
  req.set_status(static_cast<std::uint32_t>(status_code::aborted));
  req.set_status_message("t\xc3\xa9st \xe2\x9c\x93 \xf0\x9f\x98\x80");
  const auto out = run_client(h, ticks(ch, req));
  CHECK(out.sizes.size() == 2);
  CHECK(is_end_of_stream(out.end));
  CHECK(out.status == status_code::aborted);
  CHECK(out.message == req.status_message());

  const auto failed = run_client(h, ping_pong(ch, {"one", "fail", "never"}));
  CHECK(failed.sizes.size() == 1);
  CHECK(failed.status == status_code::aborted);
  CHECK(failed.message == "chat failed as asked");
}

// A stream handler that ends before it first suspends ends inside the server's start of it (a
// coroutine handler runs at once there): the stream still ends once, with its status, and the
// connection goes on serving streams.
TEST_CASE("e2e stream: a handler that fails before its first read ends the stream, the next one works",
          "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  const auto failed =
      run_client(h, [](std::shared_ptr<channel> ch) -> boost::asio::awaitable<stream_outcome> {
        client_context ctx;
        ctx.add_metadata("x-fail-at-once", "1");
        client_stream<EchoRequest, EchoReply> s(ch->start_stream(test_service::chat, &ctx, nullptr));
        stream_outcome out;
        co_await read_all(s, out);
        co_await finish(s, ctx, out);
        co_return out;
      }(ch));
  CHECK(failed.sizes.empty());
  CHECK(failed.status == status_code::aborted);
  CHECK(failed.message == "chat failed at once");
  CHECK(h.service().streams_finished.load() == 1);
  for (int i = 0; i < 2; ++i) {
    const auto ok = run_client(h, ping_pong(ch, {"one", "two"}));
    CHECK(ok.sizes == std::vector<std::size_t>{3, 3});
    CHECK(ok.status == status_code::ok);
  }
}

TEST_CASE(
    "e2e stream: cancel after begin and after the first response (interop cancel_after_begin and "
    "cancel_after_first_response)",
    "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  auto& svc = h.service();

  struct cancel_result {
    status_code finish = status_code::unknown;
    boost::system::error_code read;
  };
  // Opens a client stream, optionally exchanges one message, cancels, and sees how it ends.
  // cancel_after_begin on a client-streaming call (Sum), cancel_after_first_response on bidi (Chat).
  auto cancel_case = [](std::shared_ptr<channel> ch,
                        bool exchange_first) -> boost::asio::awaitable<cancel_result> {
    client_context ctx;
    client_stream<EchoRequest, EchoReply> s(
        ch->start_stream(exchange_first ? test_service::chat : test_service::sum, &ctx, nullptr));
    cancel_result r;
    if (exchange_first) {
      EchoRequest req;
      req.set_data("first");
      co_await s.async_write(req, tuple_awaitable);
      EchoReply reply;
      auto [ec] = co_await s.async_read(reply, tuple_awaitable);
      if (ec || reply.data() != "first") co_return r;
    }
    s.cancel();
    EchoReply reply;
    auto [rec] = co_await s.async_read(reply, tuple_awaitable);
    r.read = rec;
    auto [fec] = co_await s.async_finish(tuple_awaitable);
    r.finish = to_status_code(fec);
    co_return r;
  };
  for (bool exchange_first : {false, true}) {
    CAPTURE(exchange_first);
    const int cancelled_before = svc.streams_cancelled.load();
    const int started_before = svc.streams_started.load();
    const auto r = run_client(h, cancel_case(ch, exchange_first));
    CHECK(r.finish == status_code::cancelled);
    CHECK(to_status_code(r.read) == status_code::cancelled);
    if (exchange_first) {
      // The handler was running: it sees the cancellation.
      CHECK(svc.wait_for([&] { return svc.streams_cancelled.load() > cancelled_before; }));
    } else {
      // It may or may not have started; if it did, it is cancelled, never left running. A call
      // behind the stream on the same connection is answered only after the server read the
      // stream's frames (its record exists then, if they were sent at all); once the server holds
      // nothing, the handler has started and returned, or never will start.
      CHECK_FALSE(call(*ch, test_service::echo, make_request("behind the stream")).ec);
      REQUIRE(ch->stats().connects == 1);  // the same connection (a new one would not be ordered)
      REQUIRE(wait_until_server_idle(h));
      CHECK(
          (svc.streams_started.load() == started_before || svc.streams_cancelled.load() > cancelled_before));
    }
  }
}

TEST_CASE("e2e stream: the deadline ends a stream on both sides (interop timeout_on_sleeping_server)",
          "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  auto& svc = h.service();
  // Connected first: under ASan in the VM an rdma connect took longer than the deadline, and the
  // stream's open and its cancel then reached the server together (no handler ever started).
  REQUIRE_FALSE(call(*ch, test_service::echo, make_request("connect")).ec);
  auto body = [](std::shared_ptr<channel> ch) -> boost::asio::awaitable<stream_outcome> {
    client_context ctx;
    ctx.set_timeout(300ms);
    StreamRequest req;
    req.set_forever(true);
    req.set_size(100);
    client_stream<StreamRequest, EchoReply> s(ch->start_stream(test_service::ticks, &ctx, &req));
    stream_outcome out;
    co_await read_all(s, out);
    co_await finish(s, ctx, out);
    co_return out;
  };
  const auto out = run_client(h, body(ch));
  CHECK(to_status_code(out.end) == status_code::deadline_exceeded);
  CHECK(out.status == status_code::deadline_exceeded);
  // The server's side ends too: a handler it started is cancelled and returns. It has usually
  // started (it writes forever), but when this process is not scheduled for longer than the
  // deadline (stall-hunt stopped it seven times in nine seconds), the stream's open and the reset
  // the deadline sends reach the server together and no handler starts at all. A call behind the
  // stream on the same connection (the server reads frames in order) and an idle server tell
  // both apart from a handler still running.
  CHECK_FALSE(call(*ch, test_service::echo, make_request("behind the stream")).ec);
  REQUIRE(ch->stats().connects == 1);
  REQUIRE(wait_until_server_idle(h));
  CHECK(svc.streams_started.load() <= 1);
  CHECK(svc.streams_cancelled.load() == svc.streams_started.load());
}

TEST_CASE("e2e stream: a reader that stops holds at most its window and stalls nothing else",
          "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  channel_options opts;
  opts.stream_window = {1u << 20, 8};
  auto ch = h.make_channel(opts);
  auto& svc = h.service();
  client_context ctx;
  StreamRequest req;
  req.set_forever(true);
  req.set_size(1000);
  auto stalled = std::make_shared<client_stream<StreamRequest, EchoReply>>(
      ch->start_stream(test_service::ticks, &ctx, &req));
  // The server fills the window, then its writes wait.
  REQUIRE(svc.wait_for([&] { return svc.ticks_written.load() >= 8; }));
  // Other calls and streams on the same connection carry on meanwhile.
  for (int i = 0; i < 20; ++i) {
    const auto r = call(*ch, test_service::echo, make_request("still here"));
    REQUIRE_FALSE(r.ec);
  }
  const auto out = run_client(h, ping_pong(ch, {"a", "b"}));
  CHECK(out.status == status_code::ok);
  // The window: 8 messages, none read; a ninth write is waiting, not done.
  CHECK(svc.ticks_written.load() == 8);
  // Reading one message's worth... then cancel it: the handler ends.
  stalled->cancel();
  CHECK(svc.wait_for([&] { return svc.streams_cancelled.load() >= 1; }));
  boost::asio::post(h.client_executor(), [stalled]() mutable { stalled.reset(); });
}

TEST_CASE("e2e stream: unknown and unary methods answer UNIMPLEMENTED (interop unimplemented_method)",
          "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  auto body = [](std::shared_ptr<channel> ch, method_descriptor m) -> boost::asio::awaitable<stream_outcome> {
    client_context ctx;
    client_stream<EchoRequest, EchoReply> s(ch->start_stream(m, &ctx, nullptr));
    stream_outcome out;
    co_await read_all(s, out);
    co_await finish(s, ctx, out);
    co_return out;
  };
  const method_descriptor unknown{test_service::unknown.full_name, test_service::unknown.id,
                                  rpc_kind::bidi_streaming};
  const method_descriptor unary_as_stream{test_service::echo.full_name, test_service::echo.id,
                                          rpc_kind::bidi_streaming};
  for (const auto& m : {unknown, unary_as_stream}) {
    CAPTURE(m.full_name);
    const auto out = run_client(h, body(ch, m));
    CHECK(out.status == status_code::unimplemented);
    CHECK(to_status_code(out.end) == status_code::unimplemented);
  }
  // The connection is fine afterwards.
  CHECK_FALSE(call(*ch, test_service::echo, make_request("ok")).ec);
}

TEST_CASE("e2e stream: a stream_open with metadata beyond the server's limits is refused RESOURCE_EXHAUSTED",
          "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  // Limits as for unary requests (64 entries, 8 KiB by default), checked before anything is parsed;
  // the refusal is a reset of that stream, and the connection carries on.
  auto body = [](std::shared_ptr<channel> ch, bool many) -> boost::asio::awaitable<stream_outcome> {
    client_context ctx;
    if (many) {
      for (int i = 0; i < 65; ++i) ctx.add_metadata("k" + std::to_string(i), "");
    } else {
      ctx.add_metadata("big", std::string(9000, 'x'));
    }
    client_stream<EchoRequest, EchoReply> s(ch->start_stream(test_service::chat, &ctx, nullptr));
    stream_outcome out;
    co_await read_all(s, out);
    co_await finish(s, ctx, out);
    co_return out;
  };
  for (const bool many : {true, false}) {
    CAPTURE(many);
    const auto out = run_client(h, body(ch, many));
    CHECK(out.status == status_code::resource_exhausted);
    CHECK(out.message.find(many ? "more than 64 entries" : "larger than 8192 bytes") != std::string::npos);
    CHECK(out.sizes.empty());
  }
  const auto out = run_client(h, ping_pong(ch, {"still", "fine"}));
  CHECK(out.status == status_code::ok);
  CHECK_FALSE(call(*ch, test_service::echo, make_request("ok")).ec);
}

TEST_CASE(
    "e2e stream: a message beyond its method's max_request_bytes resets that stream RESOURCE_EXHAUSTED - "
    "the connection carries on",
    "[e2e][stream][limits]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  server_options options;
  options.max_request_bytes_by_method = {{std::string(test_service::chat.full_name), 100}};
  e2e_harness h(target, options);
  auto ch = h.make_channel();
  // 60 bytes of data is a 62-byte message, 200 one of 203: the first is echoed, the second is
  // refused unparsed, and the handler is cancelled.
  const auto out = run_client(h, ping_pong(ch, {std::string(60, 'a'), std::string(200, 'b'), "never"}));
  CHECK(out.sizes == std::vector<std::size_t>{60});
  CHECK(out.status == status_code::resource_exhausted);
  CHECK(out.message.find("message of 203 bytes larger than /rdmarpc.test.Test/Chat accepts (100)") !=
        std::string::npos);
  // Other streams on the connection, and methods without a bound, carry on.
  CHECK(run_client(h, ping_pong(ch, {"still", "fine"})).status == status_code::ok);
  const auto big_echo = call(*ch, test_service::echo, make_request(std::string(4096, 'c')));
  REQUIRE_FALSE(big_echo.ec);
  CHECK(big_echo.reply.data().size() == 4096);
}

namespace {

// One stream of a client that writes and never reads: its context and stream (the stream goes
// first: it points at the context), its writes done, and how it ended. Shared by the test and the
// writing coroutine, so either may be the last to hold it.
struct filling_writer {
  client_context ctx;
  std::shared_ptr<client_stream<EchoRequest, EchoReply>> stream;
  std::atomic<int> written{0};
  std::atomic<bool> done{false};
  std::atomic<status_code> status{status_code::unknown};
};

// Checks `done` every millisecond until it holds (true) or `timeout` passed (false): for state the
// client's io thread changes without telling anyone.
template <typename Pred>
bool poll_until(Pred done, std::chrono::milliseconds timeout = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

boost::asio::awaitable<void> write_until_stopped(std::shared_ptr<filling_writer> w, std::size_t bytes,
                                                 int most) {
  EchoRequest req;
  req.set_data(std::string(bytes, 'w'));
  for (int i = 0; i < most; ++i) {
    auto [ec] = co_await w->stream->async_write(req, tuple_awaitable);
    if (ec) break;
    ++w->written;
  }
  auto [ec] = co_await w->stream->async_finish(tuple_awaitable);
  w->status = to_status_code(ec);
  w->done = true;
}

}  // namespace

// What open streams cost a server: a client fills as many Chat streams as it may open, writing and
// never reading the echoes. Each handler stops reading once its echoes fill the client's window,
// so each stream holds the server's receive window and a message; streams beyond
// max_in_flight_per_connection are refused. Without the windows the writers' 1000 messages each
// would cost the server 128 MiB.
TEST_CASE(
    "e2e stream: a client filling every stream it may open costs the server at most "
    "max_in_flight_per_connection windows - an honest client is served meanwhile",
    "[e2e][stream][limits]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  constexpr std::size_t kStreams = 8, kRefused = 2, kMessage = 16u << 10;
  constexpr int kMost = 1000;
  server_options options;
  options.max_in_flight_per_connection = kStreams;
  options.stream_window = {256u << 10, 64};  // 16 messages of 16,388 bytes may start within it
  e2e_harness h(target, options);
  auto honest = h.make_channel();
  REQUIRE_FALSE(call(*honest, test_service::echo, make_request("before")).ec);
  channel_options filler_options;
  filler_options.stream_window = {64u << 10, 4};  // the filler's own window: 4 echoes
  auto filler = h.make_channel(filler_options);
  REQUIRE_FALSE(call(*filler, test_service::echo, make_request("connected")).ec);
  reset_peak_resident();
  const std::size_t before = resident_bytes();

  std::vector<std::shared_ptr<filling_writer>> writers;
  // However the test ends, the streams are cancelled, so the writers finish.
  struct cancel_all {
    std::vector<std::shared_ptr<filling_writer>>& writers;
    ~cancel_all() {
      for (auto& w : writers)
        if (w->stream) w->stream->cancel();
    }
  } guard{writers};
  for (std::size_t i = 0; i < kStreams + kRefused; ++i) {
    auto w = writers.emplace_back(std::make_shared<filling_writer>());
    w->stream = std::make_shared<client_stream<EchoRequest, EchoReply>>(
        filler->start_stream(test_service::chat, &w->ctx, nullptr));
    boost::asio::co_spawn(h.client_executor(), write_until_stopped(w, kMessage, kMost),
                          boost::asio::detached);
  }
  // The accepted streams fill the server's window at least; the others are refused.
  const auto filled = [&] {
    for (std::size_t i = 0; i < kStreams; ++i)
      if (writers[i]->written.load() < 15) return false;
    for (std::size_t i = kStreams; i < writers.size(); ++i)
      if (!writers[i]->done.load()) return false;
    return true;
  };
  REQUIRE(poll_until(filled));
  for (std::size_t i = kStreams; i < writers.size(); ++i)
    CHECK(writers[i]->status.load() == status_code::resource_exhausted);
  // An honest client on another connection is served meanwhile.
  for (int i = 0; i < 20; ++i) {
    const auto r = call(*honest, test_service::echo, make_request("during"));
    REQUIRE_FALSE(r.ec);
    CHECK(r.reply.data() == "during");
  }
  CHECK(run_client(h, ping_pong(honest, {"still", "fine"})).status == status_code::ok);
  // Each accepted stream: what the server's window lets start (16), as the handler read only the
  // 4 echoes the filler's window takes and the one it holds (too few for a grant, which comes at
  // half the window): far from its 1000. The bound leaves room for grants, in case they change.
  for (std::size_t i = 0; i < kStreams; ++i) {
    CAPTURE(i);
    CHECK(writers[i]->written.load() <= 16 + 4 + 1 + 6);
    CHECK_FALSE(writers[i]->done.load());
  }
  const std::size_t grown = peak_resident_bytes() - std::min(before, peak_resident_bytes());
  CAPTURE(grown);
  // Per stream 256 KiB + a message at the server and 64 KiB at the filler, and 16 MiB of slack.
  CHECK(grown < kResidentFactor * (kStreams * (512u << 10) + (16u << 20)));

  for (auto& w : writers) w->stream->cancel();
  CHECK(poll_until([&] {
    for (auto& w : writers)
      if (!w->done.load()) return false;
    return true;
  }));
  // The streams go on the client's thread, after the writers let go of them.
  boost::asio::post(h.client_executor(), [writers = std::move(writers)]() mutable { writers.clear(); });
}

TEST_CASE("e2e stream: a server that goes away fails open streams UNAVAILABLE", "[e2e][stream]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  auto body = [](std::shared_ptr<channel> ch) -> boost::asio::awaitable<stream_outcome> {
    client_context ctx;
    client_stream<EchoRequest, EchoReply> s(ch->start_stream(test_service::chat, &ctx, nullptr));
    stream_outcome out;
    co_await read_all(s, out);  // the server never answers: waits until the connection ends
    co_await finish(s, ctx, out);
    co_return out;
  };
  auto fut = boost::asio::co_spawn(h.client_executor(), body(ch), boost::asio::use_future);
  auto& svc = h.service();
  REQUIRE(svc.wait_for([&] { return svc.streams_started.load() >= 1; }));
  // Graceful shutdown waits for the stream up to its grace, then closes the connection.
  CHECK(h.shutdown(200ms));
  REQUIRE(fut.wait_for(60s) == std::future_status::ready);
  const auto out = fut.get();
  CHECK(out.status == status_code::unavailable);
  CHECK(to_status_code(out.end) == status_code::unavailable);
  CHECK(svc.wait_for([&] { return svc.streams_cancelled.load() >= 1; }));
}

TEST_CASE("e2e interop: empty_unary and large_unary", "[e2e][interop]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  const auto empty = call(*ch, test_service::echo, EchoRequest{});
  REQUIRE_FALSE(empty.ec);
  CHECK(empty.reply.ByteSizeLong() == 0);
  auto req = make_request(std::string(271828, 'q'));
  req.set_reply_size(314159);
  const auto large = call(*ch, test_service::echo, req);
  REQUIRE_FALSE(large.ec);
  CHECK(large.reply.data() == std::string(314159, 'r'));
}

TEST_CASE("e2e interop: unimplemented_service and custom_metadata on a unary call", "[e2e][interop]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  e2e_harness h(target);
  auto ch = h.make_channel();
  const method_descriptor missing{"/grpc.testing.UnimplementedService/UnimplementedCall",
                                  method_id("/grpc.testing.UnimplementedService/UnimplementedCall")};
  client_context ctx;
  CHECK(to_status_code(call(*ch, missing, EchoRequest{}, &ctx).ec) == status_code::unimplemented);
  CHECK(ctx.status() == status_code::unimplemented);

  client_context md;
  md.add_metadata("x-grpc-test-echo-initial", "test_initial_metadata_value");
  md.add_metadata("x-grpc-test-echo-trailing-bin", std::string("\x0a\x0b\x0a\x0b\x0a\x0b", 6));
  const auto r = call(*ch, test_service::meta, make_request("unary"), &md);
  REQUIRE_FALSE(r.ec);
  CHECK(value_of(md.server_initial_metadata(), "echo-x-grpc-test-echo-initial") ==
        "test_initial_metadata_value");
  CHECK(value_of(md.server_trailing_metadata(), "x-grpc-test-echo-trailing-bin") ==
        std::string("\x0a\x0b\x0a\x0b\x0a\x0b", 6));
  CHECK(value_of(md.server_trailing_metadata(), "count") == "2");
}
