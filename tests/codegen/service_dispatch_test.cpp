// The generated Service::new_call and new_stream_call, used directly as the server uses them (no
// server, no network): request parsing, handler selection by index (with escaped names), the
// reply, the statuses; stream calls run on a fake stream_io.

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <span>
#include <string>

#include "fake_stream_io.hpp"
#include "test_services.hpp"

namespace {

using namespace codegen_test;
using rdmarpc::status_code;

struct outcome {
  status_code status;
  std::string message;
  std::string response;
};

// Hears the end of a call, as the server's connection does.
struct done_target final : rdmarpc::server_done::target {
  bool done = false;
  std::uint64_t key = 0;
  std::exception_ptr failure;
  void call_done(std::uint64_t k, std::exception_ptr e) noexcept override {
    done = true;
    key = k;
    failure = std::move(e);
  }
};

// What the server does with a call object: parse (INVALID_ARGUMENT), run, serialize the reply.
outcome run_call(rdmarpc::server_call& call, const std::string& request, bool check_required) {
  if (!call.parse_request(std::as_bytes(std::span(request)), nullptr, check_required)) {
    return {status_code::invalid_argument, "cannot parse " + call.request_type(), {}};
  }
  asio::io_context io;
  rdmarpc::server_context context(io.get_executor(), "/test/Method", "test-peer",
                                  rdmarpc::server_context::clock::time_point::max(), {});
  auto target = std::make_shared<done_target>();
  asio::cancellation_signal cancel;
  call.start(context, rdmarpc::server_done(target, 1), cancel.slot());
  io.run_for(std::chrono::seconds(10));
  REQUIRE(target->done);
  CHECK(target->key == 1);
  if (target->failure) std::rethrow_exception(target->failure);
  std::string response;
  if (context.status() == status_code::ok) response = call.reply().SerializeAsString();
  return {context.status(), context.status_message(), response};
}

outcome run_dispatch(rdmarpc::service& service, std::size_t index, const std::string& request) {
  auto call = service.new_call(index);
  if (!call) return {status_code::unimplemented, "method index out of range", {}};
  return run_call(*call, request, service.methods()[index].request_may_lack_required);
}

template <typename Message>
std::string bytes_of(const Message& m) {
  return m.SerializeAsString();
}

template <typename Message>
Message parse(const std::string& bytes) {
  Message m;
  REQUIRE(m.ParseFromString(bytes));
  return m;
}

}  // namespace

TEST_CASE("dispatch parses the request, runs the handler and serializes its reply") {
  adder_impl adder;
  multi::Number n;
  n.set_value(41);
  const outcome out = run_dispatch(adder, 0, bytes_of(n));
  CHECK(out.status == status_code::ok);
  CHECK(parse<multi::Number>(out.response).value() == 42);
}

TEST_CASE("a call object serves the next call after clear()") {
  adder_impl adder;
  auto call = adder.new_call(0);
  REQUIRE(call);
  for (int i = 0; i < 3; ++i) {
    multi::Number n;
    n.set_value(i * 10);
    const outcome out = run_call(*call, bytes_of(n), false);
    CHECK(out.status == status_code::ok);
    CHECK(parse<multi::Number>(out.response).value() == i * 10 + 1);
    call->clear();
    CHECK(call->reply().ByteSizeLong() == 0);
  }
}

TEST_CASE("dispatch answers INVALID_ARGUMENT for a request that does not parse") {
  adder_impl adder;
  const outcome out = run_dispatch(adder, 0, std::string("\xff\xff\xff\xff", 4));
  CHECK(out.status == status_code::invalid_argument);
  CHECK(out.message == "cannot parse multi.Number");
  CHECK(out.response.empty());
}

TEST_CASE("dispatch answers INVALID_ARGUMENT when a proto2 required field is missing") {
  search_impl search;
  legacy_api::v1::Query partial;
  partial.set_limit(2);  // `text` is required and absent
  const outcome out = run_dispatch(search, 0, partial.SerializePartialAsString());
  CHECK(out.status == status_code::invalid_argument);
  CHECK(out.message == "cannot parse legacy_api.v1.Query");

  legacy_api::v1::Query query;
  query.set_text("x");
  const outcome ok = run_dispatch(search, 0, bytes_of(query));
  CHECK(ok.status == status_code::ok);
  CHECK(parse<legacy_api::v1::Result>(ok.response).lines_size() == 10);  // the proto2 default limit
}

TEST_CASE("dispatch answers UNIMPLEMENTED for an index past methods()") {
  adder_impl adder;
  CHECK(run_dispatch(adder, 1, "").status == status_code::unimplemented);
  nothing_impl nothing;
  CHECK(nothing.methods().empty());
  CHECK(run_dispatch(nothing, 0, "").status == status_code::unimplemented);
}

TEST_CASE("a handler's set_status suppresses the reply - a status_error propagates to the server") {
  bare_impl bare;
  const outcome out = run_dispatch(bare, 0, bytes_of(::HelloRequest{}));
  CHECK(out.status == status_code::invalid_argument);
  CHECK(out.message == "name is empty");
  CHECK(out.response.empty());

  shop_impl shop;
  common::types::Outer_Inner_Deepest missing;
  missing.set_sku("missing");
  try {
    run_dispatch(shop, 0, bytes_of(missing));
    FAIL("dispatch should have thrown");
  } catch (const rdmarpc::status_error& e) {
    CHECK(e.code() == status_code::not_found);
    CHECK(e.message() == "no sku missing");
  }
}

TEST_CASE("full_name and methods describe the service in declaration order") {
  negator_impl negator;
  CHECK(negator.full_name() == "multi.Negator");
  REQUIRE(negator.methods().size() == 2);
  CHECK(negator.methods()[0].full_name == "/multi.Negator/Negate");
  CHECK(negator.methods()[1].full_name == "/multi.Negator/GetHTTPStatus");
  CHECK(negator.methods()[1].id == rdmarpc::method_id("/multi.Negator/GetHTTPStatus"));

  bare_impl bare_object;
  const ::Bare::Service& bare = bare_object;
  CHECK(bare.full_name() == "Bare");
  CHECK(bare.methods()[0].full_name == "/Bare/Hello");
}

TEST_CASE("escaped handler names dispatch in declaration order") {
  collide_impl collide;
  REQUIRE(collide.methods().size() == 13);
  CHECK(collide.methods()[1].full_name == "/kw.Collide/Dispatch");

  kw::class_ c;
  c.set_value(3);
  CHECK(parse<kw::new_>(run_dispatch(collide, 0, bytes_of(c)).response).value() == 300);
  const auto dispatched = parse<kw::class_>(run_dispatch(collide, 1, bytes_of(kw::new_{})).response);
  CHECK(dispatched.value() == 1);
  CHECK(dispatched.inner().value() == 11);
  CHECK(parse<kw::Stub>(run_dispatch(collide, 2, bytes_of(kw::Interface{})).response).value() == 2);
  CHECK(parse<kw::Service>(run_dispatch(collide, 3, bytes_of(kw::Stub{})).response).value() == 3);
  CHECK(parse<kw::Interface>(run_dispatch(collide, 4, bytes_of(kw::Service{})).response).value() == 4);
  CHECK(parse<kw::class__new>(run_dispatch(collide, 5, bytes_of(kw::class__new{})).response).value() == 5);
  for (int i = 6; i < 13; ++i) {
    INFO("method index " << i << " " << collide.methods()[static_cast<std::size_t>(i)].full_name);
    CHECK(parse<kw::new_>(run_dispatch(collide, static_cast<std::size_t>(i), bytes_of(kw::new_{})).response)
              .value() == i);
  }
}

TEST_CASE("proto3 optional presence survives dispatch") {
  configurator_impl configurator;
  opt::Settings with;
  with.set_retries(0);  // present, with the default value
  with.set_name("");
  const auto echoed = parse<opt::Settings>(run_dispatch(configurator, 0, bytes_of(with)).response);
  CHECK(echoed.has_retries());
  CHECK(echoed.retries() == 1);
  CHECK(echoed.has_name());
  CHECK_FALSE(echoed.has_enabled());

  const auto empty = parse<opt::Settings>(run_dispatch(configurator, 0, bytes_of(opt::Settings{})).response);
  CHECK_FALSE(empty.has_retries());
  CHECK_FALSE(empty.has_name());
}

TEST_CASE("well-known types as request and reply") {
  clock_impl clock;
  const auto now = parse<google::protobuf::Timestamp>(run_dispatch(clock, 0, "").response);
  CHECK(now.seconds() == 1'700'000'000);
  google::protobuf::StringValue name;
  name.set_value("bob");
  CHECK(parse<google::protobuf::StringValue>(run_dispatch(clock, 1, bytes_of(name)).response).value() ==
        "hi bob");
  const outcome reset = run_dispatch(clock, 2, "");
  CHECK(reset.status == status_code::ok);
  CHECK(reset.response.empty());
  CHECK(clock.resets == 1);
}

namespace {

// A generated CallbackService: plain handlers that fill the reply and invoke done.
class bare_callback_impl final : public ::Bare::CallbackService {
  void hello(rdmarpc::server_context& context, const ::HelloRequest& request, ::HelloReply& reply,
             rdmarpc::server_done done) override {
    if (request.name().empty()) {
      context.set_status(status_code::invalid_argument, "name is empty");
    } else {
      reply.set_greeting("hi, " + request.name());
    }
    done();
  }
};

}  // namespace

TEST_CASE("a generated CallbackService runs its callback handler") {
  bare_callback_impl bare;
  CHECK(bare.full_name() == "Bare");
  ::HelloRequest request;
  request.set_name("cb");
  const outcome out = run_dispatch(bare, 0, bytes_of(request));
  CHECK(out.status == status_code::ok);
  CHECK(parse<::HelloReply>(out.response).greeting() == "hi, cb");
  const outcome empty = run_dispatch(bare, 0, bytes_of(::HelloRequest{}));
  CHECK(empty.status == status_code::invalid_argument);
  CHECK_FALSE(bare.new_call(1));
}

// Streaming methods: new_stream_call gives the call template of the method's kind, new_call null
// (and the other way round for unary methods); the call runs its handler on a fake stream.

namespace {

template <typename Call, typename Service>
bool stream_call_is(Service& service, std::size_t index) {
  auto call = service.new_stream_call(index);
  return call != nullptr && dynamic_cast<Call*>(call.get()) != nullptr;
}

// Runs a stream call as the server would: start it on `stream`, run until `done`.
outcome run_stream_call(rdmarpc::server_stream_call& call, std::shared_ptr<fake_stream_io> stream,
                        asio::io_context& io) {
  rdmarpc::server_context context(io.get_executor(), "/test/Stream", "test-peer",
                                  rdmarpc::server_context::clock::time_point::max(), {});
  auto target = std::make_shared<done_target>();
  asio::cancellation_signal cancel;
  call.start(context, std::move(stream), rdmarpc::server_done(target, 7), cancel.slot());
  io.run_for(std::chrono::seconds(10));
  REQUIRE(target->done);
  if (target->failure) std::rethrow_exception(target->failure);
  return {context.status(), context.status_message(), {}};
}

streams::Item item(std::int64_t id, const std::string& text) {
  streams::Item i;
  i.set_id(id);
  i.set_text(text);
  return i;
}

}  // namespace

TEST_CASE("descriptors carry the rpc kind") {
  using rdmarpc::rpc_kind;
  static_assert(streams::Events::get_method.kind == rpc_kind::unary);
  static_assert(streams::Events::watch_method.kind == rpc_kind::server_streaming);
  static_assert(streams::Events::upload_method.kind == rpc_kind::client_streaming);
  static_assert(streams::Events::chat_method.kind == rpc_kind::bidi_streaming);
  events_impl events;
  REQUIRE(events.methods().size() == 4);
  CHECK(events.methods()[1].kind == rpc_kind::server_streaming);
  CHECK(events.methods()[3].full_name == "/streams.Events/Chat");
}

TEST_CASE("new_stream_call makes the call object of each streaming kind - new_call only unary ones") {
  using streams::Item;
  using streams::Summary;
  events_impl events;
  using S = streams::Events::Service;
  CHECK(events.new_call(0) != nullptr);
  CHECK(events.new_stream_call(0) == nullptr);
  CHECK(stream_call_is<rdmarpc::server_streaming_call<S, Item, Item>>(events, 1));
  CHECK(stream_call_is<rdmarpc::client_streaming_call<S, Item, Summary>>(events, 2));
  CHECK(stream_call_is<rdmarpc::bidi_streaming_call<S, Item, Summary>>(events, 3));
  for (std::size_t i = 1; i < 4; ++i) CHECK(events.new_call(i) == nullptr);
  CHECK(events.new_call(4) == nullptr);
  CHECK(events.new_stream_call(4) == nullptr);

  events_callback_impl callback;
  using C = streams::Events::CallbackService;
  CHECK(callback.new_call(0) != nullptr);
  CHECK(callback.new_stream_call(0) == nullptr);
  CHECK(stream_call_is<rdmarpc::server_streaming_call<C, Item, Item>>(callback, 1));
  CHECK(stream_call_is<rdmarpc::client_streaming_call<C, Item, Summary>>(callback, 2));
  CHECK(stream_call_is<rdmarpc::bidi_streaming_call<C, Item, Summary>>(callback, 3));
  CHECK(callback.new_call(1) == nullptr);

  streams_only_impl only;
  CHECK(only.new_call(0) == nullptr);
  CHECK(only.new_call(1) == nullptr);
  CHECK(
      stream_call_is<rdmarpc::server_streaming_call<streams::StreamsOnly::Service, Summary, Item>>(only, 0));
  CHECK(
      stream_call_is<rdmarpc::client_streaming_call<streams::StreamsOnly::Service, Item, Summary>>(only, 1));
}

TEST_CASE("a unary-only service keeps the base's null new_stream_call") {
  adder_impl adder;
  CHECK(adder.new_stream_call(0) == nullptr);
}

TEST_CASE("stream calls run the generated handlers on a fake stream") {
  asio::io_context io;
  auto stream = std::make_shared<fake_stream_io>(io.get_executor());

  SECTION("server streaming: one request - the handler's writes") {
    events_impl events;
    stream->push_inbound(item(3, "w"));
    auto call = events.new_stream_call(1);
    REQUIRE(call);
    CHECK(run_stream_call(*call, stream, io).status == status_code::ok);
    REQUIRE(stream->written.size() == 3);
    CHECK(parse<streams::Item>(stream->written[2]).id() == 2);
    CHECK(parse<streams::Item>(stream->written[2]).text() == "w");
  }
  SECTION("client streaming: the requests - one reply") {
    events_callback_impl events;
    for (const char* text : {"a", "b", "c"}) stream->push_inbound(item(0, text));
    auto call = events.new_stream_call(2);
    REQUIRE(call);
    CHECK(run_stream_call(*call, stream, io).status == status_code::ok);
    REQUIRE(stream->written.size() == 1);
    const auto summary = parse<streams::Summary>(stream->written[0]);
    CHECK(summary.count() == 3);
    CHECK(summary.last() == "c");
  }
  SECTION("bidirectional: a reply per request") {
    events_impl events;
    for (const char* text : {"x", "y"}) stream->push_inbound(item(0, text));
    auto call = events.new_stream_call(3);
    REQUIRE(call);
    CHECK(run_stream_call(*call, stream, io).status == status_code::ok);
    REQUIRE(stream->written.size() == 2);
    CHECK(parse<streams::Summary>(stream->written[1]).count() == 2);
    CHECK(parse<streams::Summary>(stream->written[1]).last() == "y");
  }
}
