#pragma once
// Implementations of every service in tests/codegen/protos, shared by the dispatch and the
// round-trip tests. Each answers something derived from its request, so a test can tell that
// the right handler ran with the right data. Layer: tests. Threading: handlers keep no state.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include "a/b/c/deep.rdmarpc.pb.h"
#include "keywords.rdmarpc.pb.h"
#include "legacy.rdmarpc.pb.h"
#include "multi.rdmarpc.pb.h"
#include "no_package.rdmarpc.pb.h"
#include "optional_fields.rdmarpc.pb.h"
#include "rpc/status.hpp"
#include "streams.rdmarpc.pb.h"
#include "uses_import.rdmarpc.pb.h"
#include "well_known.rdmarpc.pb.h"

namespace codegen_test {

namespace asio = boost::asio;
using rdmarpc::server_context;

class deep_impl final : public a::b::c::Deep::Service {
  asio::awaitable<a::b::c::PingReply> ping(server_context&, const a::b::c::PingRequest& request) override {
    a::b::c::PingReply reply;
    reply.set_sequence(request.sequence() + 1);
    reply.set_size(request.payload().data().size());
    co_return reply;
  }
  asio::awaitable<a::b::c::PingRequest_Payload> ping_payload(
      server_context&, const a::b::c::PingRequest_Payload& request) override {
    a::b::c::PingRequest_Payload reply;
    reply.set_data(std::string(request.data().rbegin(), request.data().rend()));
    co_return reply;
  }
};

class bare_impl final : public ::Bare::Service {
  asio::awaitable<::HelloReply> hello(server_context& context, const ::HelloRequest& request) override {
    if (request.name().empty()) {
      context.set_status(rdmarpc::status_code::invalid_argument, "name is empty");
      co_return ::HelloReply{};
    }
    ::HelloReply reply;
    reply.set_greeting("hello, " + request.name());
    co_return reply;
  }
};

class shop_impl final : public shop::Shop::Service {
  static std::int64_t price_of(const common::types::Outer_Inner_Deepest& item) {
    if (item.sku() == "missing")
      throw rdmarpc::status_error(rdmarpc::status_code::not_found, "no sku " + item.sku());
    return item.kind() == common::types::Outer_Inner::KIND_BOOK
               ? 1000
               : static_cast<std::int64_t>(item.sku().size());
  }
  asio::awaitable<common::types::Money> price(server_context&,
                                              const common::types::Outer_Inner_Deepest& request) override {
    common::types::Money money;
    money.set_units(price_of(request));
    money.set_currency("EUR");
    co_return money;
  }
  asio::awaitable<common::types::Money> total(server_context&, const shop::Basket& request) override {
    common::types::Money money;
    for (const auto& item : request.items()) money.set_units(money.units() + price_of(item));
    money.set_currency("EUR");
    co_return money;
  }
};

class adder_impl final : public multi::Adder::Service {
  asio::awaitable<multi::Number> add(server_context&, const multi::Number& request) override {
    multi::Number n;
    n.set_value(request.value() + 1);
    co_return n;
  }
};

class negator_impl final : public multi::Negator::Service {
  asio::awaitable<multi::Number> negate(server_context&, const multi::Number& request) override {
    multi::Number n;
    n.set_value(-request.value());
    co_return n;
  }
  asio::awaitable<multi::Number> get_http_status(server_context&, const multi::Number&) override {
    multi::Number n;
    n.set_value(200);
    co_return n;
  }
};

class nothing_impl final : public multi::Nothing::Service {};

// Every handler answers with its declaration index (in `value`), so a test can check that the
// escaped names still dispatch in order.
class collide_impl final : public kw::Collide::Service {
  static kw::new_ index(int i) {
    kw::new_ n;
    n.set_value(i);
    return n;
  }
  asio::awaitable<kw::new_> delete_(server_context&, const kw::class_& request) override {
    co_return index(0 + 100 * request.value());
  }
  asio::awaitable<kw::class_> dispatch_(server_context&, const kw::new_&) override {
    kw::class_ c;
    c.set_value(1);
    c.mutable_inner()->set_value(11);
    co_return c;
  }
  asio::awaitable<kw::Stub> methods_(server_context&, const kw::Interface&) override {
    kw::Stub s;
    s.set_value(2);
    co_return s;
  }
  asio::awaitable<kw::Service> full_name_(server_context&, const kw::Stub&) override {
    kw::Service s;
    s.set_value(3);
    co_return s;
  }
  asio::awaitable<kw::Interface> service_(server_context&, const kw::Service&) override {
    kw::Interface i;
    i.set_value(4);
    co_return i;
  }
  asio::awaitable<kw::class__new> channel(server_context&, const kw::class__new&) override {
    kw::class__new n;
    n.set_value(5);
    co_return n;
  }
  asio::awaitable<kw::new_> assert_(server_context&, const kw::new_&) override { co_return index(6); }
  asio::awaitable<kw::new_> co_await_(server_context&, const kw::new_&) override { co_return index(7); }
  asio::awaitable<kw::new_> request(server_context&, const kw::new_&) override { co_return index(8); }
  asio::awaitable<kw::new_> response(server_context&, const kw::new_&) override { co_return index(9); }
  asio::awaitable<kw::new_> context(server_context&, const kw::new_&) override { co_return index(10); }
  asio::awaitable<kw::new_> get_method(server_context&, const kw::new_&) override { co_return index(11); }
  asio::awaitable<kw::new_> get(server_context&, const kw::new_&) override { co_return index(12); }
};

class union_impl final : public kw::union_::Service {
  asio::awaitable<kw::new_> do_(server_context&, const kw::new_& request) override {
    kw::new_ n;
    n.set_value(request.value() * 2);
    co_return n;
  }
};

class configurator_impl final : public opt::Configurator::Service {
  // Echoes the settings; a present `retries` comes back incremented, an absent one stays absent.
  asio::awaitable<opt::Settings> apply(server_context&, const opt::Settings& request) override {
    opt::Settings reply = request;
    if (request.has_retries()) reply.set_retries(request.retries() + 1);
    co_return reply;
  }
};

class clock_impl final : public wkt::Clock::Service {
  asio::awaitable<google::protobuf::Timestamp> now(server_context&, const google::protobuf::Empty&) override {
    google::protobuf::Timestamp t;
    t.set_seconds(1'700'000'000);
    t.set_nanos(42);
    co_return t;
  }
  asio::awaitable<google::protobuf::StringValue> greet(
      server_context&, const google::protobuf::StringValue& request) override {
    google::protobuf::StringValue v;
    v.set_value("hi " + request.value());
    co_return v;
  }
  asio::awaitable<google::protobuf::Empty> reset(server_context&, const google::protobuf::Empty&) override {
    ++resets;
    co_return google::protobuf::Empty{};
  }

 public:
  int resets = 0;
};

class search_impl final : public legacy_api::v1::Search::Service {
  asio::awaitable<legacy_api::v1::Result> find(server_context&,
                                               const legacy_api::v1::Query& request) override {
    legacy_api::v1::Result result;
    for (int i = 0; i < request.limit(); ++i) result.add_lines(request.text() + std::to_string(i));
    co_return result;
  }
};

// All four kinds. Get echoes; Watch writes request.id() items; Upload counts what it reads; Chat
// answers each item with the running count.
template <typename Base>
class events_impl_base : public Base {
  asio::awaitable<void> watch(server_context&, const streams::Item& request,
                              rdmarpc::server_writer<streams::Item>& writer) override {
    for (std::int64_t i = 0; i < request.id(); ++i) {
      streams::Item item;
      item.set_id(i);
      item.set_text(request.text());
      co_await writer.async_write(item, asio::use_awaitable);
    }
  }
  asio::awaitable<streams::Summary> upload(server_context&,
                                           rdmarpc::server_reader<streams::Item>& reader) override {
    streams::Summary summary;
    streams::Item item;
    while (true) {
      auto [ec] = co_await reader.async_read(item, asio::as_tuple(asio::use_awaitable));
      if (rdmarpc::is_end_of_stream(ec)) break;
      if (ec) throw boost::system::system_error(ec);
      summary.set_count(summary.count() + 1);
      summary.set_last(item.text());
    }
    co_return summary;
  }
  asio::awaitable<void> chat(
      server_context&, rdmarpc::server_reader_writer<streams::Item, streams::Summary>& stream) override {
    streams::Summary summary;
    streams::Item item;
    while (true) {
      auto [ec] = co_await stream.async_read(item, asio::as_tuple(asio::use_awaitable));
      if (rdmarpc::is_end_of_stream(ec)) co_return;
      if (ec) throw boost::system::system_error(ec);
      summary.set_count(summary.count() + 1);
      summary.set_last(item.text());
      co_await stream.async_write(summary, asio::use_awaitable);
    }
  }
};

class events_impl final : public events_impl_base<streams::Events::Service> {
  asio::awaitable<streams::Item> get(server_context&, const streams::Item& request) override {
    streams::Item reply = request;
    reply.set_text("got " + request.text());
    co_return reply;
  }
};

// CallbackService: Get is a callback, the streams are the same coroutines.
class events_callback_impl final : public events_impl_base<streams::Events::CallbackService> {
  void get(server_context&, const streams::Item& request, streams::Item& reply,
           rdmarpc::server_done done) override {
    reply = request;
    reply.set_text("cb " + request.text());
    done();
  }
};

class streams_only_impl final : public streams::StreamsOnly::Service {
  asio::awaitable<void> tail(server_context&, const streams::Summary&,
                             rdmarpc::server_writer<streams::Item>&) override {
    co_return;
  }
  asio::awaitable<streams::Summary> sink(server_context&, rdmarpc::server_reader<streams::Item>&) override {
    co_return streams::Summary{};
  }
};

}  // namespace codegen_test
