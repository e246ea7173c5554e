// spawn_handler, the launch of coroutine handlers (rpc/handler_launch.hpp), without a server: inside
// the io_context's run() a handler that never suspends ends before spawn_handler returns; from
// outside run() it runs inside run(), and the io_context keeps going for later work; a handler's
// exception and the server's cancellation of a waiting handler reach done.
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/version.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "rpc/server_call.hpp"
#include "rpc/status.hpp"

namespace {

using rdmarpc::server_done;
using rdmarpc::spawn_handler;

struct done_target final : server_done::target {
  int calls = 0;
  std::exception_ptr failure;
  void call_done(std::uint64_t /*key*/, std::exception_ptr e) noexcept override {
    ++calls;
    failure = std::move(e);
  }
};

boost::asio::awaitable<void> note_thread(boost::asio::io_context& io, bool& inside_run) {
  inside_run = io.get_executor().running_in_this_thread();
  co_return;
}

boost::asio::awaitable<void> throw_at_once() {
  throw rdmarpc::status_error(rdmarpc::status_code::aborted, "at once");
  co_return;
}

boost::asio::awaitable<void> wait_on(boost::asio::steady_timer& timer) {
  co_await timer.async_wait(boost::asio::use_awaitable);
}

}  // namespace

TEST_CASE("spawn_handler: inside run(), a handler that never suspends ends before it returns", "[server]") {
  boost::asio::io_context io(1);
  auto target = std::make_shared<done_target>();
  bool inside = false;
  int calls_when_returned = -1;
  boost::asio::post(io, [&] {
    spawn_handler(io.get_executor(), note_thread(io, inside), {}, server_done(target, 1));
    calls_when_returned = target->calls;
  });
  io.run();
  CHECK(inside);
  CHECK(target->calls == 1);
  CHECK_FALSE(target->failure);
#if BOOST_VERSION == 108100  // the direct launch (other Boost versions co_spawn: done comes later)
  CHECK(calls_when_returned == 1);
#endif
}

TEST_CASE("spawn_handler: from outside run(), handlers run inside it and the io_context keeps later work",
          "[server]") {
  boost::asio::io_context io(1);
  auto first = std::make_shared<done_target>();
  auto second = std::make_shared<done_target>();
  bool inside = false;
  spawn_handler(io.get_executor(), note_thread(io, inside), {}, server_done(first, 1));
  CHECK(first->calls == 0);  // not on the caller's thread, outside run()
  // Had the first handler's end released the context's only work, run_for would return at once.
  boost::asio::steady_timer timer(io, std::chrono::milliseconds(1));
  spawn_handler(io.get_executor(), wait_on(timer), {}, server_done(second, 2));
  io.run_for(std::chrono::seconds(30));
  CHECK(first->calls == 1);
  CHECK(inside);
  CHECK(second->calls == 1);
  CHECK_FALSE(second->failure);
}

TEST_CASE("spawn_handler: a handler's exception and the server's cancellation of a waiting one reach done",
          "[server]") {
  boost::asio::io_context io(1);
  auto thrown = std::make_shared<done_target>();
  auto cancelled = std::make_shared<done_target>();
  boost::asio::cancellation_signal signal;
  boost::asio::steady_timer timer(io, std::chrono::hours(1));
  boost::asio::post(io, [&] {
    spawn_handler(io.get_executor(), throw_at_once(), {}, server_done(thrown, 1));
    spawn_handler(io.get_executor(), wait_on(timer), signal.slot(), server_done(cancelled, 2));
    CHECK(cancelled->calls == 0);  // waiting on the timer
    boost::asio::post(io, [&] { signal.emit(boost::asio::cancellation_type::terminal); });
  });
  io.run_for(std::chrono::seconds(30));
  REQUIRE(thrown->calls == 1);
  REQUIRE(thrown->failure);
  CHECK_THROWS_AS(std::rethrow_exception(thrown->failure), rdmarpc::status_error);
  REQUIRE(cancelled->calls == 1);
  REQUIRE(cancelled->failure);
  try {
    std::rethrow_exception(cancelled->failure);
  } catch (const boost::system::system_error& e) {
    CHECK(e.code() == boost::asio::error::operation_aborted);
  }
}

namespace {

struct seen_at_done final : server_done::target {
  const std::string* reply = nullptr;
  std::string at_done;
  int calls = 0;
  void call_done(std::uint64_t /*key*/, std::exception_ptr /*e*/) noexcept override {
    ++calls;
    at_done = *reply;
  }
};

boost::asio::awaitable<std::string> answer(std::string text) {
  co_return text;
}

boost::asio::awaitable<std::string> answer_later(boost::asio::steady_timer& timer, std::string text) {
  co_await timer.async_wait(boost::asio::use_awaitable);
  co_return text;
}

}  // namespace

TEST_CASE("spawn_handler: what a handler returns is stored before done, at once or after it waited",
          "[server]") {
  boost::asio::io_context io(1);
  std::string now_reply = "old";
  std::string later_reply = "old";
  auto now = std::make_shared<seen_at_done>();
  auto later = std::make_shared<seen_at_done>();
  now->reply = &now_reply;
  later->reply = &later_reply;
  boost::asio::steady_timer timer(io, std::chrono::milliseconds(1));
  boost::asio::post(io, [&] {
    spawn_handler<std::string>(io.get_executor(), answer("at once"), &now_reply, {}, server_done(now, 1));
    spawn_handler<std::string>(io.get_executor(), answer_later(timer, "later"), &later_reply, {},
                               server_done(later, 2));
  });
  io.run_for(std::chrono::seconds(30));
  CHECK(now->calls == 1);
  CHECK(now->at_done == "at once");
  CHECK(later->calls == 1);
  CHECK(later->at_done == "later");
  // From outside run() (co_spawned): stored before done too.
  auto outside = std::make_shared<seen_at_done>();
  std::string outside_reply;
  outside->reply = &outside_reply;
  io.restart();
  spawn_handler<std::string>(io.get_executor(), answer("outside"), &outside_reply, {},
                             server_done(outside, 3));
  io.run_for(std::chrono::seconds(30));
  CHECK(outside->calls == 1);
  CHECK(outside->at_done == "outside");
}
