// Compile-only checks: every generated client method of the test protos, both overloads (with and
// without client_context), instantiated with each completion token kind; the same for every
// operation of client_stream, server_reader, server_writer and server_reader_writer, and the
// streaming functions of generated Interfaces. The static_asserts pin what each token turns the
// call into; one test case then runs each token against a fake stream_io (no network).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <tuple>
#include <type_traits>

#include "a/b/c/deep.rdmarpc.pb.h"
#include "fake_stream_io.hpp"
#include "keywords.rdmarpc.pb.h"
#include "legacy.rdmarpc.pb.h"
#include "legacy_streams.rdmarpc.pb.h"
#include "multi.rdmarpc.pb.h"
#include "no_package.rdmarpc.pb.h"
#include "optional_fields.rdmarpc.pb.h"
#include "streams.rdmarpc.pb.h"
#include "uses_import.rdmarpc.pb.h"
#include "well_known.rdmarpc.pb.h"

namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// For the client `Client` (an Interface), method `async_fn`, request `Request`, reply `Reply`.
#define RDMARPC_CHECK_TOKENS(Client, async_fn, Request, Reply)                                               \
  static_assert(std::is_void_v<decltype(std::declval<Client&>().async_fn(std::declval<const Request&>(),     \
                                                                         [](error_code, Reply) {}))>);       \
  static_assert(std::is_void_v<decltype(std::declval<Client&>().async_fn(                                    \
                    std::declval<rdmarpc::client_context&>(), std::declval<const Request&>(),                \
                    [](error_code, Reply) {}))>);                                                            \
  static_assert(std::is_same_v<decltype(std::declval<Client&>().async_fn(std::declval<const Request&>(),     \
                                                                         asio::use_future)),                 \
                               std::future<Reply>>);                                                         \
  static_assert(std::is_same_v<decltype(std::declval<Client&>().async_fn(                                    \
                                   std::declval<rdmarpc::client_context&>(), std::declval<const Request&>(), \
                                   asio::use_future)),                                                       \
                               std::future<Reply>>);                                                         \
  static_assert(std::is_same_v<decltype(std::declval<Client&>().async_fn(std::declval<const Request&>(),     \
                                                                         asio::use_awaitable)),              \
                               asio::awaitable<Reply>>);                                                     \
  static_assert(std::is_same_v<decltype(std::declval<Client&>().async_fn(                                    \
                                   std::declval<rdmarpc::client_context&>(), std::declval<const Request&>(), \
                                   asio::use_awaitable)),                                                    \
                               asio::awaitable<Reply>>);                                                     \
  static_assert(std::is_same_v<decltype(std::declval<Client&>().async_fn(                                    \
                                   std::declval<const Request&>(), asio::as_tuple(asio::use_awaitable))),    \
                               asio::awaitable<std::tuple<error_code, Reply>>>);                             \
  static_assert(std::is_same_v<decltype(std::declval<Client&>().async_fn(                                    \
                                   std::declval<rdmarpc::client_context&>(), std::declval<const Request&>(), \
                                   asio::as_tuple(asio::use_awaitable))),                                    \
                               asio::awaitable<std::tuple<error_code, Reply>>>);                             \
  static_assert(asio::is_deferred<decltype(std::declval<Client&>().async_fn(std::declval<const Request&>(),  \
                                                                            asio::deferred))>::value);       \
  static_assert(asio::is_deferred<decltype(std::declval<Client&>().async_fn(                                 \
                    std::declval<rdmarpc::client_context&>(), std::declval<const Request&>(),                \
                    asio::deferred))>::value);                                                               \
  RDMARPC_CHECK_REPLY_TOKENS(Client, async_fn, Request, Reply)

// The overloads that parse into the caller's own reply message: completion void(error_code).
#define RDMARPC_CHECK_REPLY_TOKENS(Client, async_fn, Request, Reply)                                         \
  static_assert(std::is_void_v<decltype(std::declval<Client&>().async_fn(                                    \
                    std::declval<const Request&>(), std::declval<Reply&>(), [](error_code) {}))>);           \
  static_assert(std::is_void_v<decltype(std::declval<Client&>().async_fn(                                    \
                    std::declval<rdmarpc::client_context&>(), std::declval<const Request&>(),                \
                    std::declval<Reply&>(), [](error_code) {}))>);                                           \
  static_assert(                                                                                             \
      std::is_same_v<decltype(std::declval<Client&>().async_fn(std::declval<const Request&>(),               \
                                                               std::declval<Reply&>(), asio::use_future)),   \
                     std::future<void>>);                                                                    \
  static_assert(std::is_same_v<decltype(std::declval<Client&>().async_fn(                                    \
                                   std::declval<rdmarpc::client_context&>(), std::declval<const Request&>(), \
                                   std::declval<Reply&>(), asio::use_awaitable)),                            \
                               asio::awaitable<void>>);                                                      \
  static_assert(std::is_same_v<decltype(std::declval<Client&>().async_fn(                                    \
                                   std::declval<const Request&>(), std::declval<Reply&>(),                   \
                                   asio::as_tuple(asio::use_awaitable))),                                    \
                               asio::awaitable<std::tuple<error_code>>>);                                    \
  static_assert(asio::is_deferred<decltype(std::declval<Client&>().async_fn(                                 \
                    std::declval<rdmarpc::client_context&>(), std::declval<const Request&>(),                \
                    std::declval<Reply&>(), asio::deferred))>::value);                                       \
  /* Tokens are constrained: a reply message where the token goes (the token forgotten), or a */             \
  /* handler of the wrong signature, matches no overload instead of failing deep inside Asio. */             \
  static_assert(![]<typename C, typename Q, typename P>(std::type_identity<C>, std::type_identity<Q>,        \
                                                        std::type_identity<P>) {                             \
    return requires(C & c, rdmarpc::client_context & x, const Q& q, P& p) {                                  \
      c.async_fn(q, p);                                                                                      \
    }                                                                                                        \
    || requires(C & c, rdmarpc::client_context & x, const Q& q, P& p) {                                      \
      c.async_fn(x, q, p);                                                                                   \
    };                                                                                                       \
  }(std::type_identity<Client>{}, std::type_identity<Request>{}, std::type_identity<Reply>{}));              \
  static_assert(![]<typename C, typename Q>(std::type_identity<C>, std::type_identity<Q>) {                  \
    return requires(C & c, const Q& q) {                                                                     \
      c.async_fn(q, [](error_code, int) {});                                                                 \
    };                                                                                                       \
  }(std::type_identity<Client>{}, std::type_identity<Request>{}))

// a.b.c: nested package, nested message as request and reply.
RDMARPC_CHECK_TOKENS(a::b::c::Deep::Interface, async_ping, a::b::c::PingRequest, a::b::c::PingReply);
RDMARPC_CHECK_TOKENS(a::b::c::Deep::Interface, async_ping_payload, a::b::c::PingRequest_Payload,
                     a::b::c::PingRequest_Payload);
// No package.
RDMARPC_CHECK_TOKENS(::Bare::Interface, async_hello, ::HelloRequest, ::HelloReply);
// Imported types.
RDMARPC_CHECK_TOKENS(shop::Shop::Interface, async_price, common::types::Outer_Inner_Deepest,
                     common::types::Money);
RDMARPC_CHECK_TOKENS(shop::Shop::Interface, async_total, shop::Basket, common::types::Money);
// Several services in one file.
RDMARPC_CHECK_TOKENS(multi::Adder::Interface, async_add, multi::Number, multi::Number);
RDMARPC_CHECK_TOKENS(multi::Negator::Interface, async_negate, multi::Number, multi::Number);
RDMARPC_CHECK_TOKENS(multi::Negator::Interface, async_get_http_status, multi::Number, multi::Number);
// Tokens that adapt another (a bound executor or cancellation slot, a redirected error) satisfy
// the constraint as well.
static_assert(std::is_void_v<decltype(std::declval<multi::Adder::Interface&>().async_add(
                  std::declval<const multi::Number&>(),
                  asio::bind_executor(std::declval<asio::io_context&>().get_executor(),
                                      [](error_code, multi::Number) {})))>);
static_assert(
    std::is_void_v<decltype(std::declval<multi::Adder::Interface&>().async_add(
        std::declval<const multi::Number&>(), std::declval<multi::Number&>(),
        asio::bind_cancellation_slot(std::declval<asio::cancellation_slot>(), [](error_code) {})))>);
static_assert(std::is_same_v<decltype(std::declval<multi::Adder::Interface&>().async_add(
                                 std::declval<const multi::Number&>(),
                                 asio::redirect_error(asio::use_awaitable, std::declval<error_code&>()))),
                             asio::awaitable<multi::Number>>);
// Keywords and collisions.
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_delete, kw::class_, kw::new_);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_dispatch, kw::new_, kw::class_);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_methods, kw::Interface, kw::Stub);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_full_name, kw::Stub, kw::Service);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_service, kw::Service, kw::Interface);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_channel, kw::class__new, kw::class__new);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_assert, kw::new_, kw::new_);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_co_await, kw::new_, kw::new_);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_request, kw::new_, kw::new_);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_response, kw::new_, kw::new_);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_context, kw::new_, kw::new_);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_get_method, kw::new_, kw::new_);
RDMARPC_CHECK_TOKENS(kw::Collide::Interface, async_get, kw::new_, kw::new_);
RDMARPC_CHECK_TOKENS(kw::union_::Interface, async_do, kw::new_, kw::new_);
// proto3 optional, well-known types, proto2.
RDMARPC_CHECK_TOKENS(opt::Configurator::Interface, async_apply, opt::Settings, opt::Settings);
RDMARPC_CHECK_TOKENS(wkt::Clock::Interface, async_now, google::protobuf::Empty, google::protobuf::Timestamp);
RDMARPC_CHECK_TOKENS(wkt::Clock::Interface, async_greet, google::protobuf::StringValue,
                     google::protobuf::StringValue);
RDMARPC_CHECK_TOKENS(wkt::Clock::Interface, async_reset, google::protobuf::Empty, google::protobuf::Empty);
RDMARPC_CHECK_TOKENS(legacy_api::v1::Search::Interface, async_find, legacy_api::v1::Query,
                     legacy_api::v1::Result);

// The Stub is an Interface, so the same calls work on it.
static_assert(std::is_base_of_v<kw::Collide::Interface, kw::Collide::Stub>);
RDMARPC_CHECK_TOKENS(kw::Collide::Stub, async_delete, kw::class_, kw::new_);

// Method descriptors are compile-time constants with the hashed full name.
static_assert(kw::Collide::delete_method.full_name == "/kw.Collide/Delete");
static_assert(kw::Collide::delete_method.id == rdmarpc::method_id("/kw.Collide/Delete"));
static_assert(::Bare::hello_method.full_name == "/Bare/Hello");
static_assert(a::b::c::Deep::method_descriptors.size() == 2);
static_assert(a::b::c::Deep::method_descriptors[1].full_name == "/a.b.c.Deep/PingPayload");
static_assert(multi::Nothing::method_descriptors.empty());
static_assert(multi::Negator::service_full_name == "multi.Negator");

// Streams: `expr(token)` is one stream operation; every one has the signature void(error_code).
#define RDMARPC_CHECK_STREAM_TOKENS(expr)                                                    \
  static_assert(std::is_void_v<decltype(expr([](error_code) {}))>);                          \
  static_assert(std::is_same_v<decltype(expr(asio::use_awaitable)), asio::awaitable<void>>); \
  static_assert(std::is_same_v<decltype(expr(asio::as_tuple(asio::use_awaitable))),          \
                               asio::awaitable<std::tuple<error_code>>>);                    \
  static_assert(std::is_same_v<decltype(expr(asio::use_future)), std::future<void>>);        \
  static_assert(asio::is_deferred<decltype(expr(asio::deferred))>::value)

template <typename T>
T& lvalue();  // declval as an lvalue, for operations that take Message&

#define RDMARPC_CLIENT_WRITE(token)                                              \
  lvalue<rdmarpc::client_stream<streams::Item, streams::Summary>>().async_write( \
      std::declval<const streams::Item&>(), token)
#define RDMARPC_CLIENT_READ(token)                                                                         \
  lvalue<rdmarpc::client_stream<streams::Item, streams::Summary>>().async_read(lvalue<streams::Summary>(), \
                                                                               token)
#define RDMARPC_CLIENT_WRITES_DONE(token) \
  lvalue<rdmarpc::client_stream<streams::Item, streams::Summary>>().async_writes_done(token)
#define RDMARPC_CLIENT_FINISH(token) \
  lvalue<rdmarpc::client_stream<streams::Item, streams::Summary>>().async_finish(token)
#define RDMARPC_READER_READ(token) \
  lvalue<rdmarpc::server_reader<streams::Item>>().async_read(lvalue<streams::Item>(), token)
#define RDMARPC_WRITER_WRITE(token) \
  lvalue<rdmarpc::server_writer<streams::Item>>().async_write(std::declval<const streams::Item&>(), token)
#define RDMARPC_READER_WRITER_READ(token)                                              \
  lvalue<rdmarpc::server_reader_writer<streams::Item, streams::Summary>>().async_read( \
      lvalue<streams::Item>(), token)
#define RDMARPC_READER_WRITER_WRITE(token)                                              \
  lvalue<rdmarpc::server_reader_writer<streams::Item, streams::Summary>>().async_write( \
      std::declval<const streams::Summary&>(), token)

RDMARPC_CHECK_STREAM_TOKENS(RDMARPC_CLIENT_WRITE);
RDMARPC_CHECK_STREAM_TOKENS(RDMARPC_CLIENT_READ);
RDMARPC_CHECK_STREAM_TOKENS(RDMARPC_CLIENT_WRITES_DONE);
RDMARPC_CHECK_STREAM_TOKENS(RDMARPC_CLIENT_FINISH);
RDMARPC_CHECK_STREAM_TOKENS(RDMARPC_READER_READ);
RDMARPC_CHECK_STREAM_TOKENS(RDMARPC_WRITER_WRITE);
RDMARPC_CHECK_STREAM_TOKENS(RDMARPC_READER_WRITER_READ);
RDMARPC_CHECK_STREAM_TOKENS(RDMARPC_READER_WRITER_WRITE);

// The streaming functions of generated Interfaces (and Stubs): both overloads, typed streams.
#define RDMARPC_CHECK_SERVER_STREAM(Client, fn, Request, Reply)                                \
  static_assert(std::is_same_v<decltype(lvalue<Client>().fn(std::declval<const Request&>())),  \
                               rdmarpc::client_stream<Request, Reply>>);                       \
  static_assert(std::is_same_v<decltype(lvalue<Client>().fn(lvalue<rdmarpc::client_context>(), \
                                                            std::declval<const Request&>())),  \
                               rdmarpc::client_stream<Request, Reply>>)
#define RDMARPC_CHECK_CLIENT_STREAM(Client, fn, Request, Reply)                                           \
  static_assert(std::is_same_v<decltype(lvalue<Client>().fn()), rdmarpc::client_stream<Request, Reply>>); \
  static_assert(std::is_same_v<decltype(lvalue<Client>().fn(lvalue<rdmarpc::client_context>())),          \
                               rdmarpc::client_stream<Request, Reply>>)

RDMARPC_CHECK_TOKENS(streams::Events::Interface, async_get, streams::Item, streams::Item);
RDMARPC_CHECK_SERVER_STREAM(streams::Events::Interface, watch, streams::Item, streams::Item);
RDMARPC_CHECK_CLIENT_STREAM(streams::Events::Interface, upload, streams::Item, streams::Summary);
RDMARPC_CHECK_CLIENT_STREAM(streams::Events::Interface, chat, streams::Item, streams::Summary);
RDMARPC_CHECK_SERVER_STREAM(streams::Events::Stub, watch, streams::Item, streams::Item);
RDMARPC_CHECK_CLIENT_STREAM(streams::Events::Stub, chat, streams::Item, streams::Summary);
RDMARPC_CHECK_SERVER_STREAM(streams::StreamsOnly::Interface, tail, streams::Summary, streams::Item);
RDMARPC_CHECK_CLIENT_STREAM(streams::StreamsOnly::Interface, sink, streams::Item, streams::Summary);
RDMARPC_CHECK_TOKENS(legacy_streams::Transfer::Interface, async_stat, legacy_streams::Chunk,
                     legacy_streams::Chunk);
RDMARPC_CHECK_SERVER_STREAM(legacy_streams::Transfer::Interface, download, legacy_streams::Chunk,
                            legacy_streams::Chunk);
RDMARPC_CHECK_CLIENT_STREAM(legacy_streams::Transfer::Interface, upload, legacy_streams::Chunk,
                            legacy_streams::Chunk);
RDMARPC_CHECK_CLIENT_STREAM(legacy_streams::Transfer::Interface, sync, legacy_streams::Chunk,
                            legacy_streams::Chunk);

}  // namespace

TEST_CASE("generated descriptors are usable at run time too") {
  // The compile-time checks above are the point of this file; this pins the same facts at run
  // time so the binary has something to report.
  CHECK(kw::Collide::method_descriptors.size() == 13);
  CHECK(kw::Collide::method_descriptors[0].id == kw::Collide::delete_method.id);
  CHECK(kw::Collide::get_method.full_name == "/kw.Collide/Get");
  CHECK(kw::Collide::get_method_method.full_name == "/kw.Collide/GetMethod");
  CHECK(kw::Collide::get_method.id != kw::Collide::get_method_method.id);
}

TEST_CASE("every completion token kind runs every stream operation against a fake stream_io") {
  asio::io_context io;
  auto fake = std::make_shared<codegen_test::fake_stream_io>(io.get_executor());
  rdmarpc::client_stream<streams::Item, streams::Summary> client(fake);
  rdmarpc::server_reader<streams::Item> reader(fake);
  rdmarpc::server_writer<streams::Item> writer(fake);
  rdmarpc::server_reader_writer<streams::Item, streams::Summary> reader_writer(fake);
  streams::Item item;
  streams::Summary summary;
  int completed = 0;
  auto count = [&](error_code ec) {
    CHECK_FALSE(ec);
    ++completed;
  };

  SECTION("callback") {
    client.async_write(item, count);
    client.async_writes_done(count);
    client.async_finish(count);
    writer.async_write(item, count);
    reader_writer.async_write(summary, count);
    client.async_read(summary, [&](error_code ec) {
      CHECK(rdmarpc::is_end_of_stream(ec));
      ++completed;
    });
    CHECK(completed == 0);
    io.run_for(std::chrono::seconds(10));
    CHECK(completed == 6);
  }
  SECTION("deferred starts nothing until launched") {
    auto op = client.async_writes_done(asio::deferred);
    auto read = reader.async_read(item, asio::deferred);
    CHECK(fake->writes_done_calls == 0);
    std::move(op)(count);
    std::move(read)([&](error_code ec) { completed += rdmarpc::is_end_of_stream(ec) ? 1 : 0; });
    CHECK(fake->writes_done_calls == 1);
    io.run_for(std::chrono::seconds(10));
    CHECK(completed == 2);
  }
  SECTION("use_awaitable throws end of stream - as_tuple does not") {
    fake->push_inbound(summary);
    bool threw = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await client.async_write(item, asio::use_awaitable);
          co_await client.async_read(summary, asio::use_awaitable);
          co_await writer.async_write(item, asio::use_awaitable);
          co_await reader_writer.async_write(summary, asio::use_awaitable);
          auto [eof] = co_await reader_writer.async_read(item, asio::as_tuple(asio::use_awaitable));
          CHECK(rdmarpc::is_end_of_stream(eof));
          auto [done] = co_await client.async_writes_done(asio::as_tuple(asio::use_awaitable));
          CHECK_FALSE(done);
          try {
            co_await reader.async_read(item, asio::use_awaitable);
          } catch (const boost::system::system_error& e) {
            threw = rdmarpc::is_end_of_stream(e.code());
          }
          co_await client.async_finish(asio::use_awaitable);
        },
        asio::detached);
    io.run_for(std::chrono::seconds(10));
    CHECK(threw);
    CHECK(fake->written.size() == 3);
    CHECK(fake->finish_calls == 1);
  }
  SECTION("use_future, completed by an io_context on another thread") {
    auto work = asio::make_work_guard(io);
    std::thread runner([&io] { io.run_for(std::chrono::seconds(10)); });
    client.async_write(item, asio::use_future).get();
    client.async_writes_done(asio::use_future).get();
    writer.async_write(item, asio::use_future).get();
    reader_writer.async_write(summary, asio::use_future).get();
    CHECK_THROWS_AS(reader_writer.async_read(item, asio::use_future).get(), boost::system::system_error);
    client.async_finish(asio::use_future).get();
    work.reset();
    io.stop();
    runner.join();
    CHECK(fake->written.size() == 3);
  }
}
