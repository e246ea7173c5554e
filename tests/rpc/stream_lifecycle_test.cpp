// Stream lifecycle corners over loopback: a handler that returns while its last write waits for
// the client's window still delivers it and OK; streams whose deadline passed before they were
// registered (started off the channel's thread) leave the channel; an empty client_stream fails
// its operations; a server breaking the stream rules (beyond the window, extras on a later message,
// a second stream_headers, an unknown id) is answered as docs/wire-format.md says.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include "e2e_harness.hpp"
#include "raw_frames.hpp"
#include "rpc/channel.hpp"
#include "rpc/extras.hpp"
#include "rpc/frame.hpp"
#include "rpc/server.hpp"
#include "rpc/stream.hpp"
#include "rpc/unary_call.hpp"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;
using namespace std::chrono_literals;

namespace {

constexpr auto tuple_awaitable = boost::asio::as_tuple(boost::asio::use_awaitable);

// A server-streaming method whose handler writes "one", starts writing "two" with a callback
// and returns without waiting for it.
class burst_service final : public service {
 public:
  static constexpr method_descriptor burst{"/lifecycle.B/Burst", method_id("/lifecycle.B/Burst"),
                                           rpc_kind::server_streaming};
  std::string_view full_name() const noexcept override { return "lifecycle.B"; }
  std::span<const method_descriptor> methods() const noexcept override { return methods_; }
  std::unique_ptr<server_call> new_call(std::size_t) override { return nullptr; }
  std::unique_ptr<server_stream_call> new_stream_call(std::size_t) override {
    return std::make_unique<server_streaming_call<burst_service, test::StreamRequest, test::EchoReply>>(
        *this, &burst_service::do_burst);
  }
  std::optional<boost::system::error_code> second_write;

 private:
  boost::asio::awaitable<void> do_burst(server_context&, const test::StreamRequest&,
                                        server_writer<test::EchoReply>& out) {
    test::EchoReply r;
    r.set_data("one");
    co_await out.async_write(r, boost::asio::use_awaitable);
    r.set_data("two");
    out.async_write(r, [this](boost::system::error_code ec) { second_write = ec; });
  }
  static constexpr std::array<method_descriptor, 1> methods_{burst};
};

// A server-streaming method whose handler writes ten messages with try_write while it succeeds,
// then with async_write.
class try_write_service final : public service {
 public:
  static constexpr method_descriptor burst{"/lifecycle.T/Burst", method_id("/lifecycle.T/Burst"),
                                           rpc_kind::server_streaming};
  std::string_view full_name() const noexcept override { return "lifecycle.T"; }
  std::span<const method_descriptor> methods() const noexcept override { return methods_; }
  std::unique_ptr<server_call> new_call(std::size_t) override { return nullptr; }
  std::unique_ptr<server_stream_call> new_stream_call(std::size_t) override {
    return std::make_unique<server_streaming_call<try_write_service, test::StreamRequest, test::EchoReply>>(
        *this, &try_write_service::do_burst);
  }
  int written_without_waiting = -1;

 private:
  boost::asio::awaitable<void> do_burst(server_context&, const test::StreamRequest&,
                                        server_writer<test::EchoReply>& out) {
    test::EchoReply r;
    int n = 0;
    for (; n < 10; ++n) {
      r.set_data(std::to_string(n));
      if (!out.try_write(r)) break;
    }
    written_without_waiting = n;
    for (; n < 10; ++n) {
      r.set_data(std::to_string(n));
      auto [ec] = co_await out.async_write(r, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (ec) co_return;
    }
  }
  static constexpr std::array<method_descriptor, 1> methods_{burst};
};

// A server-streaming method whose handler writes ten messages with co_await async_write, by
// use_awaitable and as_tuple(use_awaitable) in turn, and records which writes resumed it without a
// trip through the io_context: a marker posted just before each write has not run by then.
class awaited_write_service final : public service {
 public:
  static constexpr method_descriptor burst{"/lifecycle.A/Burst", method_id("/lifecycle.A/Burst"),
                                           rpc_kind::server_streaming};
  std::string_view full_name() const noexcept override { return "lifecycle.A"; }
  std::span<const method_descriptor> methods() const noexcept override { return methods_; }
  std::unique_ptr<server_call> new_call(std::size_t) override { return nullptr; }
  std::unique_ptr<server_stream_call> new_stream_call(std::size_t) override {
    return std::make_unique<
        server_streaming_call<awaited_write_service, test::StreamRequest, test::EchoReply>>(
        *this, &awaited_write_service::do_burst);
  }
  std::vector<bool> resumed_in_place;
  int markers_run = 0;

 private:
  boost::asio::awaitable<void> do_burst(server_context&, const test::StreamRequest&,
                                        server_writer<test::EchoReply>& out) {
    const auto ex = co_await boost::asio::this_coro::executor;
    test::EchoReply r;
    for (int n = 0; n < 10; ++n) {
      r.set_data(std::to_string(n));
      boost::asio::post(ex, [this] { ++markers_run; });
      const int before = markers_run;
      if (n % 2 == 0) {
        co_await out.async_write(r, boost::asio::use_awaitable);
      } else {
        auto [ec] = co_await out.async_write(r, tuple_awaitable);
        if (ec) co_return;
      }
      resumed_in_place.push_back(markers_run == before);
    }
  }
  static constexpr std::array<method_descriptor, 1> methods_{burst};
};

struct read_result {
  std::vector<std::string> got;
  boost::system::error_code end, finish;
  bool done = false;
};

// Opens a server-streaming call, reads every message (unless `read` is false) and finishes.
boost::asio::awaitable<void> read_stream(std::shared_ptr<channel> ch, method_descriptor m, read_result& res,
                                         std::chrono::milliseconds timeout, bool read = true) {
  client_context ctx;
  ctx.set_timeout(timeout);
  test::StreamRequest req;
  client_stream<test::StreamRequest, test::EchoReply> s(ch->start_stream(m, &ctx, &req));
  test::EchoReply reply;
  while (read) {
    auto [ec] = co_await s.async_read(reply, tuple_awaitable);
    if (ec) {
      res.end = ec;
      break;
    }
    res.got.push_back(reply.data());
  }
  auto [fec] = co_await s.async_finish(tuple_awaitable);
  res.finish = fec;
  res.done = true;
}

// A server with `svc` and a channel to it over loopback, the channel granting `window` per stream;
// read(m) runs a read_stream of `m` to its end (and until `also` holds).
struct loopback_stream_bed {
  loopback_stream_bed(service& svc, stream_window_size window) {
    srv.emplace(io.get_executor());
    srv->add_service(svc);
    auto [client_end, server_end] =
        transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
    srv->serve(server_end);
    channel_options opts;
    opts.stream_window = window;
    ch = channel::create(client_end, opts);
  }
  ~loopback_stream_bed() {
    ch.reset();
    srv.reset();
    io.restart();
    io.run_for(1s);
  }
  read_result read(
      method_descriptor m, const std::function<bool()>& also = [] { return true; }) {
    read_result res;
    boost::asio::co_spawn(io, read_stream(ch, m, res, 30s), boost::asio::detached);
    REQUIRE(test::run_until(
        io, [&] { return res.done && also(); }, 30s));
    return res;
  }
  boost::asio::io_context io{1};
  std::optional<server> srv;
  std::shared_ptr<channel> ch;
};

}  // namespace

TEST_CASE("stream lifecycle: a write still waiting for the window when the handler returns is delivered",
          "[stream]") {
  burst_service svc;
  loopback_stream_bed bed(svc, {1u << 20, 1});  // one message at a time: "two" waits for the grant
  const auto res = bed.read(burst_service::burst, [&] { return svc.second_write.has_value(); });
  CHECK(res.got == std::vector<std::string>{"one", "two"});
  CHECK(is_end_of_stream(res.end));
  CHECK(to_status_code(res.finish) == status_code::ok);
  CHECK_FALSE(*svc.second_write);
}

TEST_CASE("stream lifecycle: try_write writes while the window allows - then async_write waits for it",
          "[stream]") {
  try_write_service svc;
  loopback_stream_bed bed(svc, {1u << 20, 4});  // the server may write four messages ahead of our reads
  const auto res = bed.read(try_write_service::burst);
  CHECK(svc.written_without_waiting == 4);
  CHECK(res.got == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
  CHECK(to_status_code(res.finish) == status_code::ok);

  // Off the stream's executor try_write never writes (nor does an empty stream's).
  client_context ctx;
  client_stream<test::EchoRequest, test::EchoReply> chat(
      bed.ch->start_stream(test::test_service::chat, &ctx, nullptr));
  test::EchoRequest req;
  std::optional<bool> off_thread;
  std::thread([&] { off_thread = chat.try_write(req); }).join();
  CHECK(off_thread == false);
  CHECK_FALSE(client_stream<test::EchoRequest, test::EchoReply>().try_write(req));
  chat.cancel();
}

TEST_CASE("stream lifecycle: co_await async_write goes on at once when the write needs no waiting",
          "[stream]") {
  awaited_write_service svc;
  loopback_stream_bed bed(svc, {1u << 20, 4});  // the server may write four messages ahead of our reads
  const auto res = bed.read(awaited_write_service::burst);
  CHECK(res.got == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
  CHECK(to_status_code(res.finish) == status_code::ok);
  REQUIRE(svc.resumed_in_place.size() == 10);
  // The first four fit the window: both token forms resumed the handler in place. The fifth
  // waited for the client's grant, which came through the io_context.
  CHECK(svc.resumed_in_place[0]);
  CHECK(svc.resumed_in_place[1]);
  CHECK(svc.resumed_in_place[2]);
  CHECK(svc.resumed_in_place[3]);
  CHECK_FALSE(svc.resumed_in_place[4]);
}

TEST_CASE("stream lifecycle: streams whose deadline passed before registration leave the channel",
          "[stream]") {
  test::e2e_harness h("loopback");
  channel_options opts;
  opts.max_in_flight = 1;
  opts.max_queued_calls = 0;
  auto ch = h.make_channel(opts);
  auto finish_one = [&](client_context& ctx) {
    client_stream<test::EchoRequest, test::EchoReply> s(
        ch->start_stream(test::test_service::chat, &ctx, nullptr));
    auto p = std::make_shared<std::promise<boost::system::error_code>>();
    auto f = p->get_future();
    s.async_finish([p](boost::system::error_code ec) { p->set_value(ec); });
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    return to_status_code(f.get());
  };
  for (int i = 0; i < 200; ++i) {
    client_context ctx;
    ctx.set_deadline(std::chrono::steady_clock::now() - 1ms);
    REQUIRE(finish_one(ctx) == status_code::deadline_exceeded);
  }
  // Nothing stayed behind: a stream with no deadline still gets the channel's one slot.
  client_context ctx;
  ctx.set_timeout(200ms);
  CHECK(finish_one(ctx) == status_code::deadline_exceeded);  // Chat waits for our writes; we sent none
}

TEST_CASE("stream lifecycle: an empty client_stream fails every operation FAILED_PRECONDITION", "[stream]") {
  boost::asio::io_context io{1};
  client_stream<test::EchoRequest, test::EchoReply> empty;
  std::vector<status_code> seen;
  test::EchoRequest req;
  test::EchoReply reply;
  auto record = [&](boost::system::error_code ec) { seen.push_back(to_status_code(ec)); };
  empty.async_write(req, boost::asio::bind_executor(io, record));
  empty.async_read(reply, boost::asio::bind_executor(io, record));
  empty.async_writes_done(boost::asio::bind_executor(io, record));
  empty.async_finish(boost::asio::bind_executor(io, record));
  REQUIRE(test::run_until(
      io, [&] { return seen.size() == 4; }, 10s));
  for (auto code : seen) CHECK(code == status_code::failed_precondition);
}

namespace {

// A channel talking to a raw server end that writes frames by hand.
struct raw_server {
  boost::asio::io_context io{1};
  std::shared_ptr<transport::connection> server_end;
  std::shared_ptr<test::recording_handler> seen = std::make_shared<test::recording_handler>();
  std::shared_ptr<channel> ch;

  raw_server() {
    auto [c, s] = transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
    server_end = s;
    server_end->start(seen);
    channel_options opts;
    opts.stream_window = {1u << 20, 4};
    ch = channel::create(c, opts);
  }
  ~raw_server() {
    ch.reset();
    io.restart();
    io.run_for(1s);
  }
  void send(frame::kind k, std::uint32_t id, std::string_view ex = {}, std::string_view payload = {},
            std::uint32_t method = 0, std::uint64_t timeout = 0) {
    frame::header h;
    h.kind = k;
    h.call_id = id;
    h.method_id = method;
    h.timeout_us = timeout;
    REQUIRE_FALSE(server_end->send_copy(boost::asio::buffer(test::encode_frame(h, ex, payload))));
  }
  // The id of the first stream_open the channel sent.
  std::uint32_t opened() {
    std::optional<frame::header> open;
    REQUIRE(test::run_until(io, [&] {
      open = test::find_frame(seen->messages, frame::kind::stream_open);
      return open.has_value();
    }));
    return open->call_id;
  }
  bool sent_reset(std::uint32_t id) {
    return test::run_until(
        io, [&] { return test::find_frame(seen->messages, frame::kind::reset, id).has_value(); }, 10s);
  }
};

}  // namespace

TEST_CASE("stream violation from a server: beyond the window, late extras, second headers reset the stream",
          "[stream][violation]") {
  for (int scenario = 0; scenario < 3; ++scenario) {
    CAPTURE(scenario);
    raw_server rs;
    read_result res;
    // Scenario 0 reads nothing, so nothing is granted back: the fifth message is beyond the window.
    boost::asio::co_spawn(rs.io, read_stream(rs.ch, test::test_service::ticks, res, 30s, scenario != 0),
                          boost::asio::detached);
    const auto id = rs.opened();
    test::EchoReply msg;
    msg.set_data("m");
    const std::string payload = msg.SerializeAsString();
    rs.send(frame::kind::stream_headers, id, {}, {}, 64, 1u << 20);
    if (scenario == 0) {
      for (int i = 0; i < 5; ++i) rs.send(frame::kind::stream_message, id, {}, payload);
    } else if (scenario == 1) {
      rs.send(frame::kind::stream_message, id, {}, payload);
      rs.send(frame::kind::stream_message, id, extras::encode_response({}, {{"late", "x"}}), payload);
    } else {
      rs.send(frame::kind::stream_headers, id, {}, {}, 64, 1u << 20);
    }
    REQUIRE(test::run_until(
        rs.io, [&] { return res.done; }, 30s));
    CHECK(to_status_code(res.finish) == status_code::internal);
    CHECK(rs.sent_reset(id));
    CHECK(rs.seen->close_calls == 0);  // the connection carries on
  }
}

TEST_CASE("stream violation from a server: a frame for a stream never opened closes the connection",
          "[stream][violation]") {
  raw_server rs;
  read_result res;
  boost::asio::co_spawn(rs.io, read_stream(rs.ch, test::test_service::ticks, res, 30s),
                        boost::asio::detached);
  const auto id = rs.opened();
  rs.send(frame::kind::stream_message, id + 1000, {}, "");
  REQUIRE(test::run_until(
      rs.io, [&] { return res.done; }, 30s));
  CHECK(to_status_code(res.finish) == status_code::unavailable);
  CHECK(test::run_until(
      rs.io, [&] { return rs.seen->close_calls > 0; }, 10s));
}

// Read completions run in place, inside the frame that completed them: a handler that reads again
// gets the rest of a burst in order; one that drops its stream mid-burst ends it cleanly (the
// server hears a reset, the messages still arriving are ignored, the connection carries on).
TEST_CASE("stream lifecycle: read handlers run in place read a burst in order or drop the stream mid-burst",
          "[stream]") {
  for (const bool drop : {false, true}) {
    CAPTURE(drop);
    raw_server rs;
    client_context ctx;
    test::StreamRequest req;
    auto s = std::make_unique<client_stream<test::StreamRequest, test::EchoReply>>(
        rs.ch->start_stream(test::test_service::ticks, &ctx, &req));
    test::EchoReply reply;
    std::vector<std::string> got;
    boost::system::error_code last;
    std::function<void()> read_next = [&] {
      s->async_read(reply, boost::asio::bind_executor(rs.io, [&](boost::system::error_code ec) {
                      last = ec;
                      if (ec) return;
                      got.push_back(reply.data());
                      if (drop && got.size() == 2) return s.reset();
                      read_next();
                    }));
    };
    read_next();  // waiting before the burst arrives
    const auto id = rs.opened();
    rs.send(frame::kind::stream_headers, id, {}, {}, 64, 1u << 20);
    for (const char* data : {"a", "b", "c"}) {
      test::EchoReply m;
      m.set_data(data);
      rs.send(frame::kind::stream_message, id, {}, m.SerializeAsString());
    }
    if (drop) {
      CHECK(rs.sent_reset(id));
      CHECK(got == std::vector<std::string>{"a", "b"});
    } else {
      REQUIRE(test::run_until(
          rs.io, [&] { return got.size() == 3; }, 30s));
      CHECK(got == std::vector<std::string>{"a", "b", "c"});
      rs.send(frame::kind::trailers, id, {}, {});
      REQUIRE(test::run_until(
          rs.io, [&] { return is_end_of_stream(last); }, 30s));
      s.reset();
    }
    rs.io.restart();
    rs.io.poll();
    CHECK(rs.seen->close_calls == 0);  // the connection carries on
  }
}

// A read handler (then a unary call's) that throws while it runs in place, inside the frame that
// completed it: the exception comes out of the io_context's run() as any handler's would, not
// through the transport, so the connection carries on and the stream still ends; loopback, tcp.
TEST_CASE("stream lifecycle: read and unary handlers that throw in place leave the connection working",
          "[stream]") {
  for (const std::string target : {"loopback", "tcp"}) {
    CAPTURE(target);
    boost::asio::io_context io{1};
    std::optional<server> srv;
    test::test_service svc;
    srv.emplace(io.get_executor());
    srv->add_service(svc);
    std::shared_ptr<channel> ch;
    if (target == "tcp") {
      const auto ep = srv->listen("tcp://127.0.0.1:0");
      ch = channel::create(io.get_executor(), ep.to_uri());
    } else {
      auto [c, s] = transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
      srv->serve(s);
      ch = channel::create(c);
    }
    client_context ctx;
    test::StreamRequest req;
    req.set_count(3);
    client_stream<test::StreamRequest, test::EchoReply> s(
        ch->start_stream(test::test_service::ticks, &ctx, &req));
    test::EchoReply reply;
    int reads = 0;
    bool ended = false;
    std::function<void()> read_next = [&] {
      s.async_read(reply, [&](boost::system::error_code ec) {
        if (ec) {
          ended = true;
          return;
        }
        if (++reads == 1) {
          read_next();
          throw std::runtime_error("handler failed");
        }
        read_next();
      });
    };
    read_next();
    int thrown = 0;
    {
      auto guard = boost::asio::make_work_guard(io);
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      // The server may write all three before the client reads one: then the reads after the
      // first complete inside its handler, before its exception comes out of run().
      while ((!ended || thrown == 0) && std::chrono::steady_clock::now() < deadline) {
        try {
          io.run_one_for(10ms);
        } catch (const std::runtime_error&) {
          ++thrown;
        }
      }
    }
    REQUIRE(ended);
    CHECK(thrown == 1);
    CHECK(reads == 3);
    // The same for a unary call's handler, completed in place by its reply.
    bool unary_done = false;
    test::EchoRequest first;
    first.set_data("first");
    async_unary_call<test::EchoReply>(*ch, test::test_service::echo, nullptr, first,
                                      [&](boost::system::error_code, test::EchoReply) {
                                        unary_done = true;
                                        throw std::runtime_error("unary handler failed");
                                      });
    {
      auto guard = boost::asio::make_work_guard(io);
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (thrown < 2 && std::chrono::steady_clock::now() < deadline) {
        try {
          io.run_one_for(10ms);
        } catch (const std::runtime_error&) {
          ++thrown;
        }
      }
    }
    CHECK(unary_done);
    CHECK(thrown == 2);
    // The connection is fine afterwards: a unary call on it succeeds.
    std::optional<boost::system::error_code> r;
    test::EchoRequest er;
    er.set_data("after");
    async_unary_call<test::EchoReply>(*ch, test::test_service::echo, nullptr, er,
                                      [&](boost::system::error_code ec, test::EchoReply) { r = ec; });
    REQUIRE(test::run_until(
        io, [&] { return r.has_value(); }, 30s));
    CHECK_FALSE(*r);
    ch.reset();
    srv.reset();
    io.restart();
    io.run_for(1s);
  }
}
