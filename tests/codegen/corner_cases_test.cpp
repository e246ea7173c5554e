// The corner cases of tests/codegen/protos, checked where the generated API shows them: the names
// clashes.proto resolves (member pointer types pin every handler and client function), services
// and files sharing names across packages, 150 methods, custom options, and the gRPC-shaped
// health and reflection services; and the one helper every received message is parsed with.

#include <boost/asio/awaitable.hpp>
#include <catch2/catch.hpp>
#include <set>
#include <span>
#include <string>
#include <type_traits>

#include "clashes.rdmarpc.pb.h"
#include "custom_options.rdmarpc.pb.h"
#include "grpc_like/health/v1/health.rdmarpc.pb.h"
#include "grpc_like/reflection/v1/reflection.rdmarpc.pb.h"
#include "legacy.rdmarpc.pb.h"
#include "many_methods.rdmarpc.pb.h"
#include "multi.rdmarpc.pb.h"
#include "required_reach.rdmarpc.pb.h"
#include "rpc/parse_message.hpp"
#include "same_name/a/common.rdmarpc.pb.h"
#include "same_name/b/common.rdmarpc.pb.h"

namespace {

namespace asio = boost::asio;
using rdmarpc::rpc_kind;
using rdmarpc::server_context;

template <typename T>
T& lvalue();

// Handler signatures, as a Service (or CallbackService) `Owner` declares them.
template <typename Owner, typename Request, typename Reply>
using unary_handler = asio::awaitable<Reply> (Owner::*)(server_context&, const Request&);
template <typename Owner, typename Request, typename Reply>
using server_streaming_handler = asio::awaitable<void> (Owner::*)(server_context&, const Request&,
                                                                  rdmarpc::server_writer<Reply>&);
template <typename Owner, typename Request, typename Reply>
using client_streaming_handler = asio::awaitable<Reply> (Owner::*)(server_context&,
                                                                   rdmarpc::server_reader<Request>&);
template <typename Owner, typename Request, typename Reply>
using bidi_streaming_handler =
    asio::awaitable<void> (Owner::*)(server_context&, rdmarpc::server_reader_writer<Request, Reply>&);

#define RDMARPC_CHECK_HANDLER(Kind, Owner, handler, Request, Reply) \
  static_assert(std::is_same_v<decltype(&Owner::handler), Kind##_handler<Owner, Request, Reply>>)

using clash::Status;
using C = clash::Clash;
using CS = clash::Clash::Service;
using stream = rdmarpc::client_stream<Status, Status>;

// Each rpc of clashes.proto: its handler, its client function, its descriptor.
RDMARPC_CHECK_HANDLER(unary, CS, service_, Status, Status);
RDMARPC_CHECK_HANDLER(server_streaming, CS, stub, Status, Status);
RDMARPC_CHECK_HANDLER(client_streaming, CS, interface, Status, Status);
RDMARPC_CHECK_HANDLER(bidi_streaming, CS, channel_2, Status, Status);  // Stub::channel() was there first
RDMARPC_CHECK_HANDLER(unary, CS, full_name_, Status, Status);
RDMARPC_CHECK_HANDLER(server_streaming, CS, methods_, Status, Status);
RDMARPC_CHECK_HANDLER(unary, CS, methods_2, Status, Status);  // rpc Methods_
RDMARPC_CHECK_HANDLER(unary, CS, new_call_, Status, Status);
RDMARPC_CHECK_HANDLER(bidi_streaming, CS, new_stream_call_, Status, Status);
RDMARPC_CHECK_HANDLER(server_streaming, CS, watch, Status, Status);
RDMARPC_CHECK_HANDLER(unary, CS, watch_2, Status, Status);              // rpc watch
RDMARPC_CHECK_HANDLER(bidi_streaming, CS, do_watch_3, Status, Status);  // rpc DoWatch
RDMARPC_CHECK_HANDLER(unary, CS, get, Status, Status);
RDMARPC_CHECK_HANDLER(client_streaming, CS, async_get_2, Status, Status);  // rpc AsyncGet
RDMARPC_CHECK_HANDLER(unary, CS, status, Status, google::rpc::Status);
RDMARPC_CHECK_HANDLER(unary, CS, get_user, Status, Status);
RDMARPC_CHECK_HANDLER(unary, CS, get_user_2, Status, Status);  // rpc Get_User
RDMARPC_CHECK_HANDLER(unary, CS, get_user2, Status, Status);
RDMARPC_CHECK_HANDLER(bidi_streaming, CS, delete_, Status, Status);
RDMARPC_CHECK_HANDLER(server_streaming, CS, context, Status, Status);
RDMARPC_CHECK_HANDLER(server_streaming, CS, request, Status, Status);
RDMARPC_CHECK_HANDLER(client_streaming, CS, assert_, Status, Status);
RDMARPC_CHECK_HANDLER(unary, CS, rpc, Status, Status);  // rpc _
RDMARPC_CHECK_HANDLER(unary, clash::get_method::Service, get_2, Status, Status);

static_assert(std::is_same_v<decltype(lvalue<C::Interface>().stub(lvalue<const Status>())), stream>);
static_assert(std::is_same_v<decltype(lvalue<C::Interface>().interface()), stream>);
static_assert(
    std::is_same_v<decltype(lvalue<C::Stub>().channel_2(lvalue<rdmarpc::client_context>())), stream>);
static_assert(
    std::is_same_v<decltype(lvalue<C::Stub>().channel()), const std::shared_ptr<rdmarpc::channel>&>);
static_assert(std::is_same_v<decltype(lvalue<C::Interface>().watch(lvalue<const Status>())), stream>);
static_assert(std::is_same_v<decltype(lvalue<C::Interface>().do_watch_3()), stream>);
static_assert(std::is_same_v<decltype(lvalue<C::Interface>().async_get_2()), stream>);
static_assert(std::is_same_v<decltype(lvalue<C::Interface>().delete_()), stream>);
static_assert(std::is_same_v<decltype(lvalue<C::Interface>().context(lvalue<rdmarpc::client_context>(),
                                                                     lvalue<const Status>())),
                             stream>);
static_assert(std::is_same_v<decltype(lvalue<C::Interface>().assert_()), stream>);
static_assert(std::is_void_v<decltype(lvalue<C::Interface>().async_watch_2(
                  lvalue<const Status>(), [](boost::system::error_code, Status) {}))>);
static_assert(std::is_void_v<decltype(lvalue<C::Interface>().async_status(
                  lvalue<const Status>(), [](boost::system::error_code, google::rpc::Status) {}))>);

static_assert(C::watch_method.full_name == "/clash.Clash/Watch");
static_assert(C::watch_2_method.full_name == "/clash.Clash/watch");
static_assert(C::watch_2_method.kind == rpc_kind::unary);
static_assert(C::do_watch_3_method.full_name == "/clash.Clash/DoWatch");
static_assert(C::rpc_method.full_name == "/clash.Clash/_");
static_assert(C::method_descriptors.size() == 28);
// Service classes renamed around protoc's names; their wire names stay.
static_assert(clash::get_method::get_2_method.full_name == "/clash.get_method/Get");
static_assert(clash::Foo_Bar_2::service_full_name == "clash.Foo_Bar");
static_assert(std::is_class_v<clash::Foo_Bar>);  // protoc's message class, untouched
static_assert(clash::FooDefaultTypeInternal_2::service_full_name == "clash.FooDefaultTypeInternal");
static_assert(clash::Foo_Kind_2::service_full_name == "clash.Foo_Kind");
static_assert(clash::Foo_KIND_ONE_2::service_full_name == "clash.Foo_KIND_ONE");
static_assert(clash::service_full_name_2::service_full_name == "clash.service_full_name");

// Same service name, same file name, two packages, one translation unit.
static_assert(!std::is_same_v<same_name::a::Common::Interface, same_name::b::Common::Interface>);
static_assert(same_name::a::Common::service_full_name == "same_name.a.Common");
static_assert(same_name::b::Common::ping_method.id != same_name::a::Common::ping_method.id);
RDMARPC_CHECK_HANDLER(server_streaming, same_name::a::Common::Service, pings, same_name::a::Ping,
                      same_name::a::Ping);
RDMARPC_CHECK_HANDLER(bidi_streaming, same_name::b::Common::Service, pongs, same_name::b::Ping,
                      same_name::b::Ping);

// gRPC's health and reflection shapes.
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
static_assert(grpc::health::v1::Health::watch_method.kind == rpc_kind::server_streaming);
static_assert(grpc::health::v1::Health::watch_method.full_name == "/grpc.health.v1.Health/Watch");
RDMARPC_CHECK_HANDLER(unary, grpc::health::v1::Health::Service, check, HealthCheckRequest,
                      HealthCheckResponse);
RDMARPC_CHECK_HANDLER(server_streaming, grpc::health::v1::Health::Service, watch, HealthCheckRequest,
                      HealthCheckResponse);
RDMARPC_CHECK_HANDLER(server_streaming, grpc::health::v1::Health::CallbackService, watch, HealthCheckRequest,
                      HealthCheckResponse);
static_assert(std::is_same_v<
              decltype(lvalue<grpc::health::v1::Health::Stub>().watch(lvalue<const HealthCheckRequest>())),
              rdmarpc::client_stream<HealthCheckRequest, HealthCheckResponse>>);
namespace refl = grpc::reflection::v1;
static_assert(refl::ServerReflection::server_reflection_info_method.full_name ==
              "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo");
static_assert(refl::ServerReflection::server_reflection_info_method.kind == rpc_kind::bidi_streaming);
RDMARPC_CHECK_HANDLER(bidi_streaming, refl::ServerReflection::Service, server_reflection_info,
                      refl::ServerReflectionRequest, refl::ServerReflectionResponse);
static_assert(
    std::is_same_v<decltype(lvalue<refl::ServerReflection::Stub>().server_reflection_info()),
                   rdmarpc::client_stream<refl::ServerReflectionRequest, refl::ServerReflectionResponse>>);

// 150 methods: kinds cycle unary, server, client, bidi (make_many_methods.py).
static_assert(many::Wide::method_descriptors.size() == 150);
static_assert(many::Wide::method149_method.full_name == "/many.Wide/Method149");
static_assert(many::Wide::method149_method.kind == rpc_kind::server_streaming);
RDMARPC_CHECK_HANDLER(bidi_streaming, many::Wide::Service, method147, many::Large, many::Small);

constexpr bool many_kinds_cycle() {
  for (std::size_t i = 0; i < many::Wide::method_descriptors.size(); ++i) {
    constexpr rpc_kind kinds[] = {rpc_kind::unary, rpc_kind::server_streaming, rpc_kind::client_streaming,
                                  rpc_kind::bidi_streaming};
    if (many::Wide::method_descriptors[i].kind != kinds[i % 4]) return false;
  }
  return true;
}
static_assert(many_kinds_cycle());

}  // namespace

TEST_CASE("150 methods have 150 distinct ids") {
  std::set<std::uint32_t> ids;
  for (const auto& method : many::Wide::method_descriptors) ids.insert(method.id);
  CHECK(ids.size() == 150);
}

TEST_CASE("custom options survive in the descriptors next to the generated services") {
  const auto* file = opts::Login::descriptor()->file();
  CHECK(file->options().GetExtension(opts::owner) == "codegen tests");
  CHECK(opts::Login::descriptor()->options().GetExtension(opts::audited));
  const auto* auth = file->FindServiceByName("Auth");
  REQUIRE(auth != nullptr);
  CHECK(auth->options().GetExtension(opts::team) == "identity");
  CHECK(auth->method(0)->options().GetExtension(opts::timeout_ms) == 500);
  CHECK(auth->method(0)->options().GetExtension(opts::retry).attempts() == 3);
  CHECK(auth->method(1)->options().GetExtension(opts::idempotent));
  static_assert(opts::Auth::refresh_method.kind == rpc_kind::bidi_streaming);
  CHECK(opts::Auth::method_descriptors[0].full_name == "/opts.Auth/SignIn");
}

// Unary calls check IsInitialized() only where a type can fail it: every proto3 type cannot; a proto2
// type can through its own required fields, a message field's, a map value's or an extension's.
static_assert(!multi::Adder::add_method.request_may_lack_required);
static_assert(!multi::Adder::add_method.reply_may_lack_required);
static_assert(legacy_api::v1::Search::find_method.request_may_lack_required);
static_assert(!legacy_api::v1::Search::find_method.reply_may_lack_required);
static_assert(reach::Reach::wrapped_method.request_may_lack_required);
static_assert(!reach::Reach::wrapped_method.reply_may_lack_required);
static_assert(reach::Reach::mapped_method.request_may_lack_required);
static_assert(!reach::Reach::mapped_method.reply_may_lack_required);  // a cycle, nothing required
static_assert(reach::Reach::extended_method.request_may_lack_required);
static_assert(reach::Reach::extended_method.reply_may_lack_required);
static_assert(reach::Reach::cyclic_method.request_may_lack_required);  // found past the cycle
static_assert(reach::Reach::cyclic_method.reply_may_lack_required);    // behind a oneof
static_assert(reach::Reach::grouped_method.request_may_lack_required);

TEST_CASE("a required field one message down still makes IsInitialized() false") {
  // What the flags stand for, checked on the messages themselves.
  reach::Wrapper wrapper;
  CHECK(wrapper.IsInitialized());
  wrapper.mutable_leaf();
  CHECK_FALSE(wrapper.IsInitialized());
  reach::MapHolder holder;
  (*holder.mutable_leaves())["a"];
  CHECK_FALSE(holder.IsInitialized());
  reach::Cycle cycle;
  cycle.mutable_next()->mutable_next()->set_v(1);
  CHECK(cycle.IsInitialized());
  reach::CycleA cyclic;
  cyclic.mutable_b()->mutable_a()->mutable_b()->mutable_leaf();
  CHECK_FALSE(cyclic.IsInitialized());
  reach::OneOf one_of;
  one_of.mutable_leaf();
  CHECK_FALSE(one_of.IsInitialized());
  reach::WithGroup grouped;
  grouped.mutable_part();
  CHECK_FALSE(grouped.IsInitialized());
}

TEST_CASE("parse_message checks required fields only when asked, and rejects bad bytes") {
  legacy_api::v1::Query full;
  full.set_text("find me");
  full.set_limit(3);
  const std::string full_bytes = full.SerializeAsString();
  legacy_api::v1::Query lacking;
  lacking.set_limit(4);  // `text` is required and missing
  const std::string lacking_bytes = lacking.SerializePartialAsString();
  const auto span_of = [](const std::string& s) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(s.data()), s.size());
  };

  legacy_api::v1::Query into;
  into.set_text("left over");
  REQUIRE(rdmarpc::detail::parse_message(into, span_of(full_bytes), true));
  CHECK(into.text() == "find me");
  CHECK(into.limit() == 3);

  // The parse replaces what was there: the left-over text does not satisfy `required`.
  CHECK_FALSE(rdmarpc::detail::parse_message(into, span_of(lacking_bytes), true));
  REQUIRE(rdmarpc::detail::parse_message(into, span_of(lacking_bytes), false));
  CHECK_FALSE(into.has_text());
  CHECK(into.limit() == 4);

  // Through the base class too (how the client's reply parse and streams call it).
  google::protobuf::MessageLite& base = into;
  CHECK_FALSE(rdmarpc::detail::parse_message(base, span_of(lacking_bytes), true));

  // A field cut short is no message, whatever the flag: the text's length says 7, 2 bytes follow.
  const std::string cut = full_bytes.substr(0, 4);
  CHECK_FALSE(rdmarpc::detail::parse_message(into, span_of(cut), false));
}
