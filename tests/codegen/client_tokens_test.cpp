// Compile-only checks: every generated client method of the test protos, both overloads (with and
// without client_context), instantiated with each completion token kind. The static_asserts pin
// what each token turns the call into; nothing here runs a call.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <tuple>
#include <type_traits>

#include "a/b/c/deep.rdmarpc.pb.h"
#include "keywords.rdmarpc.pb.h"
#include "legacy.rdmarpc.pb.h"
#include "multi.rdmarpc.pb.h"
#include "no_package.rdmarpc.pb.h"
#include "optional_fields.rdmarpc.pb.h"
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
                    asio::deferred))>::value)

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
