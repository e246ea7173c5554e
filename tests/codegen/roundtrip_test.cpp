// Every test .proto, end to end: generated Stub -> rdmarpc::channel -> tcp://127.0.0.1 -> server ->
// generated Service::dispatch -> handler, and back. Also the statuses a handler sets or throws.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "rpc/channel.hpp"
#include "rpc/server.hpp"
#include "test_services.hpp"

namespace {

using namespace codegen_test;
using boost::system::error_code;
using rdmarpc::status_code;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// Serves `services` on tcp://127.0.0.1:<any port>, runs `body` with a channel to it, then shuts
// both down. Fails the test if `body` does not finish within the time limit.
void with_server(std::vector<rdmarpc::service*> services,
                 std::function<asio::awaitable<void>(std::shared_ptr<rdmarpc::channel>)> body) {
  asio::io_context io;
  rdmarpc::server server(io.get_executor());
  for (rdmarpc::service* s : services) server.add_service(*s);
  const auto endpoint = server.listen("tcp://127.0.0.1:0");
  auto channel = rdmarpc::channel::create(io.get_executor(), endpoint.to_uri());
  bool finished = false;
  bool shut_down = false;
  std::exception_ptr failure;
  asio::co_spawn(io, body(channel), [&](std::exception_ptr e) {
    finished = true;
    failure = e;
    channel->close();
    server.async_shutdown(std::chrono::seconds(2), [&] { shut_down = true; });
  });
  io.run_for(std::chrono::seconds(60));
  CHECK(shut_down);
  REQUIRE(finished);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

TEST_CASE("nested package a.b.c with nested messages") {
  deep_impl deep;
  with_server({&deep}, [](auto channel) -> asio::awaitable<void> {
    a::b::c::Deep::Stub stub(channel);
    a::b::c::PingRequest request;
    request.set_sequence(7);
    request.mutable_payload()->set_data(std::string(1024, 'x'));
    auto [ec, reply] = co_await stub.async_ping(request, tuple_awaitable);
    CHECK_FALSE(ec);
    CHECK(reply.sequence() == 8);
    CHECK(reply.size() == 1024);
    a::b::c::PingRequest_Payload payload;
    payload.set_data("abc");
    auto reversed = co_await stub.async_ping_payload(payload, asio::use_awaitable);
    CHECK(reversed.data() == "cba");
  });
}

TEST_CASE("no package: global namespace") {
  bare_impl bare;
  with_server({&bare}, [](auto channel) -> asio::awaitable<void> {
    ::Bare::Stub stub(channel);
    ::HelloRequest request;
    request.set_name("ada");
    auto [ec, reply] = co_await stub.async_hello(request, tuple_awaitable);
    CHECK_FALSE(ec);
    CHECK(reply.greeting() == "hello, ada");

    rdmarpc::client_context context;
    auto [bad, none] = co_await stub.async_hello(context, ::HelloRequest{}, tuple_awaitable);
    CHECK(bad == status_code::invalid_argument);
    CHECK(context.status() == status_code::invalid_argument);
    CHECK(context.status_message() == "name is empty");
  });
}

TEST_CASE("imported types from another package - a thrown status_error reaches the caller") {
  shop_impl shop;
  with_server({&shop}, [](auto channel) -> asio::awaitable<void> {
    shop::Shop::Stub stub(channel);
    common::types::Outer_Inner_Deepest book;
    book.set_sku("b-1");
    book.set_kind(common::types::Outer_Inner::KIND_BOOK);
    auto [ec, price] = co_await stub.async_price(book, tuple_awaitable);
    CHECK_FALSE(ec);
    CHECK(price.units() == 1000);
    CHECK(price.currency() == "EUR");

    shop::Basket basket;
    *basket.add_items() = book;
    basket.add_items()->set_sku("abc");
    auto [ec2, total] = co_await stub.async_total(basket, tuple_awaitable);
    CHECK_FALSE(ec2);
    CHECK(total.units() == 1003);

    rdmarpc::client_context context;
    common::types::Outer_Inner_Deepest missing;
    missing.set_sku("missing");
    auto [ec3, none] = co_await stub.async_price(context, missing, tuple_awaitable);
    CHECK(ec3 == status_code::not_found);
    CHECK(context.status_message() == "no sku missing");
  });
}

TEST_CASE("several services from one file on one server and one channel") {
  adder_impl adder;
  negator_impl negator;
  nothing_impl nothing;
  with_server({&adder, &negator, &nothing}, [](auto channel) -> asio::awaitable<void> {
    multi::Adder::Stub adder_stub(channel);
    multi::Negator::Stub negator_stub(channel);
    multi::Nothing::Stub nothing_stub(channel);  // no methods, but constructible
    CHECK(nothing_stub.channel() == channel);
    multi::Number n;
    n.set_value(5);
    {
      auto reply = co_await adder_stub.async_add(n, asio::use_awaitable);
      CHECK(reply.value() == 6);
    }
    {
      auto reply = co_await negator_stub.async_negate(n, asio::use_awaitable);
      CHECK(reply.value() == -5);
    }
    {
      auto reply = co_await negator_stub.async_get_http_status(n, asio::use_awaitable);
      CHECK(reply.value() == 200);
    }
  });
}

TEST_CASE("keyword and colliding names, called through the stub") {
  collide_impl collide;
  union_impl union_service;
  with_server({&collide, &union_service}, [](auto channel) -> asio::awaitable<void> {
    kw::Collide::Stub stub(channel);
    kw::class_ c;
    c.set_value(2);
    {
      auto reply = co_await stub.async_delete(c, asio::use_awaitable);
      CHECK(reply.value() == 200);
    }
    {
      auto reply = co_await stub.async_dispatch(kw::new_{}, asio::use_awaitable);
      CHECK(reply.inner().value() == 11);
    }
    {
      auto reply = co_await stub.async_methods(kw::Interface{}, asio::use_awaitable);
      CHECK(reply.value() == 2);
    }
    {
      auto reply = co_await stub.async_full_name(kw::Stub{}, asio::use_awaitable);
      CHECK(reply.value() == 3);
    }
    {
      auto reply = co_await stub.async_service(kw::Service{}, asio::use_awaitable);
      CHECK(reply.value() == 4);
    }
    {
      auto reply = co_await stub.async_channel(kw::class__new{}, asio::use_awaitable);
      CHECK(reply.value() == 5);
    }
    {
      auto reply = co_await stub.async_assert(kw::new_{}, asio::use_awaitable);
      CHECK(reply.value() == 6);
    }
    {
      auto reply = co_await stub.async_co_await(kw::new_{}, asio::use_awaitable);
      CHECK(reply.value() == 7);
    }
    {
      auto reply = co_await stub.async_request(kw::new_{}, asio::use_awaitable);
      CHECK(reply.value() == 8);
    }
    {
      auto reply = co_await stub.async_response(kw::new_{}, asio::use_awaitable);
      CHECK(reply.value() == 9);
    }
    {
      auto reply = co_await stub.async_context(kw::new_{}, asio::use_awaitable);
      CHECK(reply.value() == 10);
    }
    {
      auto reply = co_await stub.async_get_method(kw::new_{}, asio::use_awaitable);
      CHECK(reply.value() == 11);
    }
    {
      auto reply = co_await stub.async_get(kw::new_{}, asio::use_awaitable);
      CHECK(reply.value() == 12);
    }

    kw::union_::Stub union_stub(channel);
    kw::new_ n;
    n.set_value(21);
    {
      auto reply = co_await union_stub.async_do(n, asio::use_awaitable);
      CHECK(reply.value() == 42);
    }
  });
}

TEST_CASE("proto3 optional fields keep their presence over the wire") {
  configurator_impl configurator;
  with_server({&configurator}, [](auto channel) -> asio::awaitable<void> {
    opt::Configurator::Stub stub(channel);
    opt::Settings settings;
    settings.set_retries(0);
    auto reply = co_await stub.async_apply(settings, asio::use_awaitable);
    CHECK(reply.has_retries());
    CHECK(reply.retries() == 1);
    CHECK_FALSE(reply.has_name());
    auto empty = co_await stub.async_apply(opt::Settings{}, asio::use_awaitable);
    CHECK_FALSE(empty.has_retries());
  });
}

TEST_CASE("google.protobuf.Empty, Timestamp and StringValue as request and reply") {
  clock_impl clock;
  with_server({&clock}, [&clock](auto channel) -> asio::awaitable<void> {
    wkt::Clock::Stub stub(channel);
    auto now = co_await stub.async_now(google::protobuf::Empty{}, asio::use_awaitable);
    CHECK(now.seconds() == 1'700'000'000);
    CHECK(now.nanos() == 42);
    google::protobuf::StringValue name;
    name.set_value("eve");
    {
      auto reply = co_await stub.async_greet(name, asio::use_awaitable);
      CHECK(reply.value() == "hi eve");
    }
    auto [ec, empty] = co_await stub.async_reset(google::protobuf::Empty{}, tuple_awaitable);
    CHECK_FALSE(ec);
    CHECK(clock.resets == 1);
  });
}

TEST_CASE("proto2 with required fields and defaults") {
  search_impl search;
  with_server({&search}, [](auto channel) -> asio::awaitable<void> {
    legacy_api::v1::Search::Stub stub(channel);
    legacy_api::v1::Query query;
    query.set_text("q");
    query.set_limit(3);
    auto result = co_await stub.async_find(query, asio::use_awaitable);
    REQUIRE(result.lines_size() == 3);
    CHECK(result.lines(2) == "q2");
  });
}

TEST_CASE("a callback-style call through the stub") {
  adder_impl adder;
  with_server({&adder}, [](auto channel) -> asio::awaitable<void> {
    multi::Adder::Stub stub(channel);
    multi::Number n;
    n.set_value(1);
    std::optional<std::int64_t> seen;
    stub.async_add(n, [&seen](error_code ec, multi::Number reply) {
      CHECK_FALSE(ec);
      seen = reply.value();
    });
    CHECK_FALSE(seen.has_value());  // never completes inside the initiating call
    // Wait for the callback (bounded): poll the flag on this executor.
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (int i = 0; i < 10'000 && !seen; ++i) {
      timer.expires_after(std::chrono::milliseconds(1));
      co_await timer.async_wait(asio::use_awaitable);
    }
    REQUIRE(seen.has_value());
    CHECK(*seen == 2);
  });
}
