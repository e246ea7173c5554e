// User code written against a generated Interface with streaming methods, tested with a fake: the
// fake overrides do_* and hands out its own stream_io, and the generated client_stream reads and
// writes through it (no channel, no network).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "fake_stream_io.hpp"
#include "streams.rdmarpc.pb.h"

namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using codegen_test::fake_stream_io;

// The fake: each do_* records its arguments and returns a fake stream prepared by the test.
class fake_events final : public streams::Events::Interface {
 public:
  explicit fake_events(asio::any_io_executor ex) : stream(std::make_shared<fake_stream_io>(std::move(ex))) {}

  std::shared_ptr<fake_stream_io> stream;
  std::vector<std::string> opened;  // which do_* ran
  std::vector<bool> saw_context;
  std::optional<streams::Item> watch_request;

 private:
  void do_get(rdmarpc::client_context*, const streams::Item&,
              rdmarpc::unary_completion<streams::Item>) override {
    FAIL("unary Get is not used here");
  }
  std::shared_ptr<rdmarpc::stream_io> do_watch(rdmarpc::client_context* context,
                                               const streams::Item& request) override {
    opened.push_back("watch");
    saw_context.push_back(context != nullptr);
    watch_request = request;
    return stream;
  }
  std::shared_ptr<rdmarpc::stream_io> do_upload(rdmarpc::client_context* context) override {
    opened.push_back("upload");
    saw_context.push_back(context != nullptr);
    return stream;
  }
  std::shared_ptr<rdmarpc::stream_io> do_chat(rdmarpc::client_context* context) override {
    opened.push_back("chat");
    saw_context.push_back(context != nullptr);
    return stream;
  }
};

// "User code": collects a server stream's texts, then its status.
asio::awaitable<std::pair<std::vector<std::string>, error_code>> collect(streams::Events::Interface& events,
                                                                         rdmarpc::client_context& context) {
  streams::Item request;
  request.set_id(2);
  auto stream = events.watch(context, request);
  std::vector<std::string> texts;
  streams::Item item;
  while (true) {
    auto [ec] = co_await stream.async_read(item, asio::as_tuple(asio::use_awaitable));
    if (rdmarpc::is_end_of_stream(ec)) break;
    if (ec) co_return std::pair{texts, ec};
    texts.push_back(item.text());
  }
  auto [status] = co_await stream.async_finish(asio::as_tuple(asio::use_awaitable));
  co_return std::pair{texts, status};
}

template <typename T>
T run_coroutine(asio::io_context& io, asio::awaitable<T> coroutine) {
  std::optional<T> result;
  std::exception_ptr failure;
  asio::co_spawn(io, std::move(coroutine), [&](std::exception_ptr e, T value) {
    failure = e;
    result = std::move(value);
  });
  io.run_for(std::chrono::seconds(10));
  if (failure) std::rethrow_exception(failure);
  REQUIRE(result.has_value());
  return std::move(*result);
}

streams::Item item(const std::string& text) {
  streams::Item i;
  i.set_text(text);
  return i;
}

}  // namespace

TEST_CASE("a server stream from a fake Interface is read through the generated client_stream") {
  asio::io_context io;
  fake_events events(io.get_executor());
  events.stream->push_inbound(item("one"));
  events.stream->push_inbound(item("two"));

  SECTION("to the end - then its status") {
    rdmarpc::client_context context;
    auto [texts, status] = run_coroutine(io, collect(events, context));
    CHECK(texts == std::vector<std::string>{"one", "two"});
    CHECK_FALSE(status);
    CHECK(events.opened == std::vector<std::string>{"watch"});
    CHECK(events.saw_context == std::vector<bool>{true});
    REQUIRE(events.watch_request.has_value());
    CHECK(events.watch_request->id() == 2);
    CHECK(events.stream->finish_calls == 1);
  }
  SECTION("a failed stream reports the status from async_finish") {
    events.stream->finish_result = rdmarpc::make_error_code(rdmarpc::status_code::permission_denied);
    rdmarpc::client_context context;
    auto [texts, status] = run_coroutine(io, collect(events, context));
    CHECK(texts.size() == 2);
    CHECK(status == rdmarpc::status_code::permission_denied);
  }
}

TEST_CASE("client streaming writes then half-closes - then reads the one reply") {
  asio::io_context io;
  fake_events events(io.get_executor());
  streams::Summary reply;
  reply.set_count(3);
  events.stream->push_inbound(reply);

  const auto summary = run_coroutine(io, [&]() -> asio::awaitable<streams::Summary> {
    auto stream = events.upload();
    for (const char* text : {"a", "b", "c"}) co_await stream.async_write(item(text), asio::use_awaitable);
    co_await stream.async_writes_done(asio::use_awaitable);
    streams::Summary got;
    co_await stream.async_read(got, asio::use_awaitable);
    co_await stream.async_finish(asio::use_awaitable);
    co_return got;
  }());
  CHECK(summary.count() == 3);
  CHECK(events.opened == std::vector<std::string>{"upload"});
  CHECK(events.saw_context == std::vector<bool>{false});
  REQUIRE(events.stream->written.size() == 3);
  streams::Item last;
  REQUIRE(last.ParseFromString(events.stream->written[2]));
  CHECK(last.text() == "c");
  CHECK(events.stream->writes_done_calls == 1);
}

TEST_CASE("a bidirectional stream with a client_context - dropping it cancels the stream") {
  asio::io_context io;
  fake_events events(io.get_executor());
  rdmarpc::client_context context;
  {
    auto stream = events.chat(context);
    CHECK(stream.io() == events.stream);
    bool written = false;
    stream.async_write(item("hi"), [&](error_code ec) { written = !ec; });
    CHECK_FALSE(written);  // never inside the initiating call
    io.run_for(std::chrono::seconds(10));
    CHECK(written);
    CHECK(events.stream->cancel_calls == 0);
  }
  CHECK(events.stream->cancel_calls == 1);  // destroyed before it finished
  CHECK(events.saw_context == std::vector<bool>{true});
  CHECK(events.stream->written.size() == 1);
}
