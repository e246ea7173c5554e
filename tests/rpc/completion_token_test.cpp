// async_unary_call with every completion token kind: compiled (the unevaluated checks below) and
// run over the loopback transport. Also checks the handler's associated executor is honoured.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <tuple>

#include "e2e_harness.hpp"

using namespace rdmarpc;
using namespace rdmarpc::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace compile_only {
// The return type of each token kind, checked without running anything.
[[maybe_unused]] void instantiate(channel& ch, const EchoRequest& req) {
  static_assert(std::is_void_v<decltype(async_unary_call<EchoReply>(
                    ch, test_service::echo, nullptr, req, [](boost::system::error_code, EchoReply) {}))>);
  static_assert(std::is_same_v<decltype(async_unary_call<EchoReply>(ch, test_service::echo, nullptr, req,
                                                                    asio::use_future)),
                               std::future<EchoReply>>);
  static_assert(std::is_same_v<decltype(async_unary_call<EchoReply>(ch, test_service::echo, nullptr, req,
                                                                    asio::use_awaitable)),
                               asio::awaitable<EchoReply>>);
  static_assert(std::is_same_v<decltype(async_unary_call<EchoReply>(ch, test_service::echo, nullptr, req,
                                                                    asio::as_tuple(asio::use_awaitable))),
                               asio::awaitable<std::tuple<boost::system::error_code, EchoReply>>>);
  auto op = async_unary_call<EchoReply>(ch, test_service::echo, nullptr, req, asio::deferred);
  static_assert(asio::is_deferred<decltype(op)>::value || !std::is_void_v<decltype(op)>);
}
}  // namespace compile_only

TEST_CASE("tokens: callback", "[tokens]") {
  e2e_harness h("loopback");
  auto ch = h.make_channel();
  std::promise<std::pair<boost::system::error_code, std::string>> p;
  auto f = p.get_future();
  async_unary_call<EchoReply>(*ch, test_service::echo, nullptr, make_request("cb"),
                              [&p](boost::system::error_code ec, EchoReply r) {
                                p.set_value({ec, r.data()});
                              });
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  const auto [ec, data] = f.get();
  CHECK_FALSE(ec);
  CHECK(data == "cb");
}

TEST_CASE("tokens: use_future delivers the reply, and errors as system_error", "[tokens]") {
  e2e_harness h("loopback");
  auto ch = h.make_channel();
  auto ok =
      async_unary_call<EchoReply>(*ch, test_service::echo, nullptr, make_request("fut"), asio::use_future);
  REQUIRE(ok.wait_for(10s) == std::future_status::ready);
  CHECK(ok.get().data() == "fut");
  auto bad =
      async_unary_call<EchoReply>(*ch, test_service::unknown, nullptr, make_request("?"), asio::use_future);
  REQUIRE(bad.wait_for(10s) == std::future_status::ready);
  try {
    bad.get();
    FAIL("expected an exception");
  } catch (const boost::system::system_error& e) {
    CHECK(to_status_code(e.code()) == status_code::unimplemented);
  }
}

TEST_CASE("tokens: use_awaitable and as_tuple(use_awaitable)", "[tokens]") {
  e2e_harness h("loopback");
  auto ch = h.make_channel();
  std::promise<std::string> p;
  auto f = p.get_future();
  asio::co_spawn(
      h.client_executor(),
      [&]() -> asio::awaitable<std::string> {
        std::string out;
        EchoReply r = co_await async_unary_call<EchoReply>(*ch, test_service::echo, nullptr,
                                                           make_request("aw"), asio::use_awaitable);
        out += r.data();
        try {
          co_await async_unary_call<EchoReply>(*ch, test_service::fail, nullptr, make_request("k"),
                                               asio::use_awaitable);
          out += "|no-throw";
        } catch (const boost::system::system_error& e) {
          out += "|" + std::string(to_string(to_status_code(e.code())));
        }
        auto [ec, r2] = co_await async_unary_call<EchoReply>(
            *ch, test_service::throws, nullptr, make_request("t"), asio::as_tuple(asio::use_awaitable));
        out += "|" + std::string(to_string(to_status_code(ec)));
        auto [ec3, r3] = co_await async_unary_call<EchoReply>(
            *ch, test_service::echo, nullptr, make_request("tup"), asio::as_tuple(asio::use_awaitable));
        out += "|" + std::string(ec3 ? "err" : r3.data());
        co_return out;
      },
      [&p](std::exception_ptr e, std::string out) {
        if (e) {
          p.set_exception(e);
        } else {
          p.set_value(std::move(out));
        }
      });
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK(f.get() == "aw|NOT_FOUND|INTERNAL|tup");
}

TEST_CASE("tokens: deferred starts the call only when launched", "[tokens]") {
  e2e_harness h("loopback");
  auto ch = h.make_channel();
  const auto req = make_request("later");  // must outlive the deferred operation's launch
  auto op = async_unary_call<EchoReply>(*ch, test_service::echo, nullptr, req, asio::deferred);
  CHECK(ch->stats().calls_started == 0);
  std::promise<std::string> p;
  auto f = p.get_future();
  std::move(op)([&p](boost::system::error_code ec, EchoReply r) { p.set_value(ec ? "error" : r.data()); });
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK(f.get() == "later");
  CHECK(ch->stats().calls_started == 1);
}

TEST_CASE("tokens: the completion runs on the handler's associated executor", "[tokens]") {
  // Declared first, destroyed last: the channel's thread signals this context's scheduler while
  // handing it the completion, and must be joined (with h) before the context goes.
  io_thread other;
  e2e_harness h("loopback");
  auto ch = h.make_channel();
  auto strand = asio::make_strand(other.io());
  std::promise<bool> p;
  auto f = p.get_future();
  async_unary_call<EchoReply>(
      *ch, test_service::echo, nullptr, make_request("where"),
      asio::bind_executor(strand, [&p, strand](boost::system::error_code ec, EchoReply) {
        p.set_value(!ec && strand.running_in_this_thread());
      }));
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK(f.get());
  CHECK(other.drain());
}
