// User code written against a generated client Interface, tested with a fake instead of a server:
// the fake derives from shop::Shop::Interface and overrides the do_* functions. Also runs every
// completion token kind against it (no network involved).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "uses_import.rdmarpc.pb.h"

namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using common::types::Money;
using common::types::Outer_Inner_Deepest;

// "User code": totals a basket by asking the shop for each item's price. It only knows the
// Interface, so production passes a Stub and tests pass a fake.
class basket_pricer {
 public:
  explicit basket_pricer(shop::Shop::Interface& shop) : shop_(shop) {}

  // The sum of the items' prices in cents, or the first error.
  asio::awaitable<std::pair<error_code, std::int64_t>> total(const std::vector<std::string>& skus) {
    std::int64_t sum = 0;
    for (const std::string& sku : skus) {
      Outer_Inner_Deepest item;
      item.set_sku(sku);
      rdmarpc::client_context context;
      auto [ec, price] = co_await shop_.async_price(context, item, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return std::pair{ec, std::int64_t{0}};
      sum += price.units();
    }
    co_return std::pair{error_code{}, sum};
  }

 private:
  shop::Shop::Interface& shop_;
};

// The fake: a price list; unknown SKUs answer NOT_FOUND. Completes through post, like the real
// stub (never inline). (A fake serving several executors would dispatch to the handler's
// associated executor; these tests run one io_context.)
class fake_shop final : public shop::Shop::Interface {
 public:
  explicit fake_shop(asio::any_io_executor ex) : ex_(std::move(ex)) {}

  std::map<std::string, std::int64_t> prices;
  int price_calls = 0;
  int total_calls = 0;
  std::vector<bool> saw_context;

 private:
  void do_price(rdmarpc::client_context* context, const Outer_Inner_Deepest& request,
                rdmarpc::unary_completion<Money> done) override {
    ++price_calls;
    saw_context.push_back(context != nullptr);
    Money reply;
    error_code ec;
    if (auto it = prices.find(request.sku()); it != prices.end()) {
      reply.set_units(it->second);
      reply.set_currency("EUR");
    } else {
      ec = rdmarpc::make_error_code(rdmarpc::status_code::not_found);
      if (context != nullptr)
        context->set_result(rdmarpc::status_code::not_found, "no such sku " + request.sku());
    }
    asio::post(ex_, [done = std::move(done), ec, reply = std::move(reply)]() mutable {
      done(ec, std::move(reply));
    });
  }

  void do_total(rdmarpc::client_context*, const shop::Basket&,
                rdmarpc::unary_completion<Money> done) override {
    ++total_calls;
    asio::post(ex_, [done = std::move(done)]() mutable {
      done(rdmarpc::make_error_code(rdmarpc::status_code::unimplemented), Money{});
    });
  }

  asio::any_io_executor ex_;
};

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

}  // namespace

TEST_CASE("user code runs against a fake derived from the generated Interface") {
  asio::io_context io;
  fake_shop shop(io.get_executor());
  shop.prices = {{"book", 1250}, {"pen", 199}};
  basket_pricer pricer(shop);

  SECTION("all items known") {
    auto [ec, sum] = run_coroutine(io, pricer.total({"book", "pen", "pen"}));
    CHECK_FALSE(ec);
    CHECK(sum == 1250 + 199 + 199);
    CHECK(shop.price_calls == 3);
    CHECK(shop.saw_context == std::vector<bool>{true, true, true});
  }
  SECTION("an unknown item stops the total with its status") {
    auto [ec, sum] = run_coroutine(io, pricer.total({"book", "lamp", "pen"}));
    CHECK(ec == rdmarpc::status_code::not_found);
    CHECK(sum == 0);
    CHECK(shop.price_calls == 2);
  }
}

TEST_CASE("every completion token kind works against the Interface") {
  asio::io_context io;
  fake_shop shop(io.get_executor());
  shop.prices = {{"book", 1250}};
  shop::Shop::Interface& client = shop;
  Outer_Inner_Deepest book;
  book.set_sku("book");
  Outer_Inner_Deepest lamp;
  lamp.set_sku("lamp");

  SECTION("callback, never invoked inside the initiating call") {
    std::optional<Money> got;
    client.async_price(book, [&](error_code ec, Money m) {
      CHECK_FALSE(ec);
      got = std::move(m);
    });
    CHECK_FALSE(got.has_value());
    io.run_for(std::chrono::seconds(10));
    REQUIRE(got.has_value());
    CHECK(got->units() == 1250);
    CHECK(shop.saw_context == std::vector<bool>{false});
  }
  SECTION("callback with a client_context carries the status message") {
    rdmarpc::client_context context;
    error_code got;
    client.async_price(context, lamp, [&](error_code ec, Money) { got = ec; });
    io.run_for(std::chrono::seconds(10));
    CHECK(got == rdmarpc::status_code::not_found);
    CHECK(context.status() == rdmarpc::status_code::not_found);
    CHECK(context.status_message() == "no such sku lamp");
  }
  SECTION("use_future, completed by an io_context on another thread") {
    auto work = asio::make_work_guard(io);
    std::thread runner([&io] { io.run_for(std::chrono::seconds(10)); });
    std::future<Money> ok = client.async_price(book, asio::use_future);
    std::future<Money> missing = client.async_price(lamp, asio::use_future);
    CHECK(ok.get().units() == 1250);
    CHECK_THROWS_AS(missing.get(), boost::system::system_error);
    work.reset();
    io.stop();
    runner.join();
  }
  SECTION("use_awaitable throws on error, as_tuple(use_awaitable) does not") {
    auto result = run_coroutine(io, [&]() -> asio::awaitable<std::int64_t> {
      Money m = co_await client.async_price(book, asio::use_awaitable);
      bool threw = false;
      try {
        co_await client.async_price(lamp, asio::use_awaitable);
      } catch (const boost::system::system_error& e) {
        threw = e.code() == rdmarpc::status_code::not_found;
      }
      CHECK(threw);
      auto [ec, none] = co_await client.async_total(shop::Basket{}, asio::as_tuple(asio::use_awaitable));
      CHECK(ec == rdmarpc::status_code::unimplemented);
      co_return m.units();
    }());
    CHECK(result == 1250);
    CHECK(shop.total_calls == 1);
  }
  SECTION("the caller's own reply message: filled on success, cleared on error, reusable") {
    Money reply;
    reply.set_currency("stale");  // left from an earlier call: must not survive either outcome
    error_code first = rdmarpc::status_code::unknown;
    client.async_price(book, reply, [&](error_code ec) { first = ec; });
    io.run_for(std::chrono::seconds(10));
    CHECK_FALSE(first);
    CHECK(reply.units() == 1250);
    CHECK(reply.currency() == "EUR");
    rdmarpc::client_context context;
    error_code second;
    io.restart();
    client.async_price(context, lamp, reply, [&](error_code ec) { second = ec; });
    io.run_for(std::chrono::seconds(10));
    CHECK(second == rdmarpc::status_code::not_found);
    CHECK(reply.units() == 0);
    CHECK(reply.currency().empty());
    CHECK(shop.saw_context == std::vector<bool>{false, true});
    io.restart();
    const error_code third = run_coroutine(io, [&]() -> asio::awaitable<error_code> {
      auto [ec] = co_await client.async_price(book, reply, asio::as_tuple(asio::use_awaitable));
      co_return ec;
    }());
    CHECK_FALSE(third);
    CHECK(reply.units() == 1250);
  }
  SECTION("deferred starts nothing until launched") {
    auto op = client.async_price(book, asio::deferred);
    CHECK(shop.price_calls == 0);
    std::optional<std::int64_t> units;
    std::move(op)([&](error_code ec, Money m) {
      CHECK_FALSE(ec);
      units = m.units();
    });
    CHECK(shop.price_calls == 1);
    io.run_for(std::chrono::seconds(10));
    CHECK(units == 1250);
  }
}
