// The tool's pieces without a shell: JSON splitting and error wording, option parsing, close-name
// suggestions, exit statuses, the latency histogram, and the generic unary op and stream over a
// real kv server on tcp (the channel parsing into a DynamicMessage).

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <rdmarpc/server.hpp>
#include <thread>

#include "cli_error.hpp"
#include "descriptor_source.hpp"
#include "generic_call.hpp"
#include "json_io.hpp"
#include "kv.pb.h"
#include "latency_histogram.hpp"
#include "memory_store.hpp"
#include "options.hpp"
#include "store_service.hpp"
#include "wire_checked_reply.hpp"

namespace {

using namespace rdmarpc::cli;
namespace gp = google::protobuf;
namespace asio = boost::asio;

int status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const cli_error& e) {
    return e.exit_status();
  }
  return 0;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const cli_error& e) {
    return e.what();
  }
  return "";
}

options parse(std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("rdmarpc")};
  for (auto& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("split_json_objects: one per line, concatenated, with braces in strings") {
  const auto objects = split_json_objects("{\"a\":1}\n{\"b\":\"}{\"}{\"c\":[{\"d\":2}]}  \n");
  REQUIRE(objects.size() == 3);
  CHECK(objects[0] == "{\"a\":1}");
  CHECK(objects[1] == "{\"b\":\"}{\"}");
  CHECK(objects[2] == "{\"c\":[{\"d\":2}]}");
  CHECK(split_json_objects("  \n").empty());
  CHECK(status_of([] { split_json_objects("{\"a\":1}\n[1]"); }) == kExitBadInput);
  CHECK(message_of([] { split_json_objects("{\"a\":1}\n{\"b\":"); }) ==
        "request line 2: the JSON object is never closed");
}

TEST_CASE("parse_json: a field that does not exist is named, nested ones with their path") {
  kv::ScanRequest scan;
  parse_json(R"({"startKey":"a","limit":3})", scan);
  CHECK(scan.start_key() == "a");
  CHECK(scan.limit() == 3);
  parse_json(R"({"start_key":"b"})", scan);  // the .proto name works too, and the message was cleared
  CHECK(scan.start_key() == "b");
  CHECK(scan.limit() == 0);

  kv::GetRequest get;
  CHECK(message_of([&] { parse_json(R"({"ky":"x"})", get); }) ==
        "kv.GetRequest has no field 'ky' (its fields: key)");
  CHECK(status_of([&] { parse_json(R"({"ky":"x"})", get); }) == kExitBadInput);
  kv::WatchEvent event;
  CHECK(message_of([&] { parse_json(R"({"kind":"PUT","entry":{"key":"k","vers":"1"}})", event); }) ==
        "kv.WatchEvent has no field 'entry.vers' (kv.Entry's fields: key, value, version)");
  kv::ScanReply reply;
  CHECK(message_of([&] { parse_json(R"({"entries":[{"key":"a"},{"kee":"b"}]})", reply); }) ==
        "kv.ScanReply has no field 'entries.kee' (kv.Entry's fields: key, value, version)");
  CHECK(message_of([&] {
          parse_json(R"({"key":5})", get);
        }).starts_with("the request does not fit kv.GetRequest: "));
}

TEST_CASE("to_json_line: one line, defaults only when asked") {
  kv::GetReply reply;
  reply.set_value("red");
  CHECK(to_json_line(reply, false) == R"({"value":"cmVk"})");
  CHECK(to_json_line(reply, true) == R"({"value":"cmVk","version":"0"})");
}

TEST_CASE("parse_options: flags anywhere, values checked, usage errors") {
  const auto o = parse({"call", "tcp://h:1", "kv.Store/Get", "--metadata", "a=b", "--timeout=1.5", "-Iproto",
                        "--proto", "x.proto", "{}", "-v"});
  CHECK(o.command == "call");
  CHECK(o.uri == "tcp://h:1");
  CHECK(o.arguments == std::vector<std::string>{"kv.Store/Get", "{}"});
  CHECK(o.metadata == std::vector<std::pair<std::string, std::string>>{{"a", "b"}});
  CHECK(o.timeout == std::chrono::milliseconds(1500));
  CHECK_FALSE(o.heartbeat_timeout.has_value());  // the channel's default
  CHECK(parse({"list", "u", "--heartbeat-timeout", "5"}).heartbeat_timeout == std::chrono::seconds(5));
  CHECK(parse({"list", "u", "--heartbeat-timeout=0"}).heartbeat_timeout == std::chrono::seconds(0));
  CHECK(o.import_dirs == std::vector<std::string>{"proto"});
  CHECK(o.verbose);
  CHECK(status_of([] { parse({"call"}); }) == kExitUsage);
  CHECK(status_of([] { parse({}); }) == kExitUsage);
  CHECK(status_of([] { parse({"bench", "u", "--concurrency", "0"}); }) == kExitUsage);
  CHECK(status_of([] { parse({"call", "u", "--timeout", "soon"}); }) == kExitUsage);
  CHECK(status_of([] { parse({"call", "u", "--heartbeat-timeout", "-1"}); }) == kExitUsage);
  CHECK(status_of([] { parse({"call", "u", "--timeout", "1e300"}); }) == kExitUsage);  // no overflow
  // Positive but below a nanosecond: refused, not taken for 0 (no deadline / heartbeats off).
  CHECK(message_of([] {
          parse({"call", "u", "--heartbeat-timeout", "1e-12"});
        }) == "--heartbeat-timeout 1e-12 is shorter than the clock's tick (1 ns); 0 turns heartbeats off");
  CHECK(status_of([] { parse({"call", "u", "--timeout=1e-10"}); }) == kExitUsage);
  CHECK(parse({"call", "u", "--timeout", "1.5e-9"}).timeout == std::chrono::nanoseconds(1));
  CHECK(status_of([] { parse({"call", "u", "--metadata", "novalue"}); }) == kExitUsage);
  CHECK(message_of([] {
          parse({"list", "u", "--colour"});
        }) == "unknown option --colour (rdmarpc --help lists them)");
  CHECK(parse({"--help"}).help);
}

TEST_CASE("exit statuses: 0 for OK, 64 + the canonical code otherwise") {
  CHECK(exit_status_for(rdmarpc::status_code::ok) == 0);
  CHECK(exit_status_for(rdmarpc::status_code::cancelled) == 65);
  CHECK(exit_status_for(rdmarpc::status_code::unavailable) == 78);
  CHECK(exit_status_for(rdmarpc::status_code::unauthenticated) == 80);
}

TEST_CASE("close_names: typos, case and a missing package, closest first") {
  const std::vector<std::string> names{"kv.Store", "kv.Stats", "grpc.health.v1.Health"};
  CHECK(close_names("kv.Stor", names) == std::vector<std::string>{"kv.Store"});
  CHECK(close_names("kv.Stat", names) == std::vector<std::string>{"kv.Stats"});
  CHECK(close_names("kv.store", names).front() == "kv.Store");
  CHECK(close_names("Health", names) == std::vector<std::string>{"grpc.health.v1.Health"});
  CHECK(close_names("completely.Different", names).empty());
}

TEST_CASE("latency_histogram: percentiles within a bucket, bars cover every call") {
  latency_histogram h;
  CHECK(h.percentile(0.5) == 0);
  for (std::uint64_t v = 1; v <= 100000; ++v) h.record(v * 1000);  // 1 us .. 100 ms
  CHECK(h.count() == 100000);
  CHECK(h.min() == 1000);
  CHECK(h.max() == 100000000);
  const auto near = [](std::uint64_t got, double want) {
    return std::abs(double(got) - want) <= want * 0.02;
  };
  CHECK(near(h.percentile(0.5), 50e6));
  CHECK(near(h.percentile(0.99), 99e6));
  CHECK(near(h.percentile(0.999), 99.9e6));
  CHECK(h.percentile(1.0) == h.max());
  std::uint64_t total = 0, last = 0;
  for (const auto& b : h.bars(10)) {
    CHECK(b.from_ns <= b.to_ns);
    CHECK(b.from_ns >= last);
    last = b.to_ns;
    total += b.count;
  }
  CHECK(total == h.count());
  CHECK(h.bars(10).back().to_ns == h.max());
}

TEST_CASE("the generic unary op and a generic stream carry DynamicMessages over tcp") {
  kv::memory_store store;
  kv::store_service service(store);
  asio::io_context server_io;
  rdmarpc::server server(server_io.get_executor(), {.threads = 1});
  server.add_service(service);
  const std::string uri = server.listen("tcp://127.0.0.1:0").to_uri();

  // Types from a pool of their own, as --proto or reflection give them (not the generated classes).
  gp::DescriptorPool pool;
  gp::FileDescriptorProto file;
  kv::GetRequest::descriptor()->file()->CopyTo(&file);
  REQUIRE(pool.BuildFile(file) != nullptr);
  gp::DynamicMessageFactory factory(&pool);
  const auto* put = pool.FindMethodByName("kv.Store.Put");
  const auto* watch = pool.FindMethodByName("kv.Store.PutMany");
  REQUIRE(put != nullptr);
  REQUIRE(watch != nullptr);

  asio::io_context io;
  auto channel = rdmarpc::channel::create(io.get_executor(), uri);
  const method_ref put_ref(*put), many_ref(*watch);
  CHECK(put_ref.descriptor().full_name == "/kv.Store/Put");
  CHECK(put_ref.descriptor().id == rdmarpc::method_id("/kv.Store/Put"));
  CHECK(many_ref.kind() == rdmarpc::rpc_kind::client_streaming);

  std::unique_ptr<gp::Message> request(factory.GetPrototype(put->input_type())->New());
  std::unique_ptr<gp::Message> reply(factory.GetPrototype(put->output_type())->New());
  parse_json(R"({"key":"k","value":"dg=="})", *request);
  std::unique_ptr<gp::Message> many_reply(factory.GetPrototype(watch->output_type())->New());
  boost::system::error_code unary_ec, stream_ec = rdmarpc::make_error_code(rdmarpc::status_code::unknown);
  bool done = false;
  rdmarpc::client_context context, stream_context;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        constexpr auto token = asio::as_tuple(asio::use_awaitable);
        std::tie(unary_ec) =
            co_await async_generic_call(*channel, put_ref.descriptor(), &context, *request, *reply, token);
        generic_stream stream(channel->start_stream(many_ref.descriptor(), &stream_context, nullptr));
        co_await stream.async_write(*request, token);
        co_await stream.async_write(*request, token);
        co_await stream.async_writes_done(token);
        co_await stream.async_read(*many_reply, token);
        std::tie(stream_ec) = co_await stream.async_finish(token);
        done = true;
      },
      asio::detached);
  std::thread server_thread([&] { server_io.run_for(std::chrono::seconds(10)); });
  while (!done && io.run_one_for(std::chrono::seconds(10)) > 0) {
  }
  channel->close();
  server.async_shutdown(std::chrono::seconds(1), [&] { server_io.stop(); });
  server_thread.join();
  REQUIRE(done);
  CHECK_FALSE(unary_ec);
  CHECK(to_json_line(*reply, false) == R"({"version":"1"})");
  CHECK_FALSE(stream_ec);
  CHECK(to_json_line(*many_reply, false) == R"({"count":2,"lastVersion":"3"})");
  CHECK(store.size() == 1);
}

TEST_CASE("wire_checked_reply: a well-formed reply is accepted, a malformed one is refused", "[cli]") {
  kv::GetReply reply;
  reply.set_version(7);
  reply.set_value(std::string(300, 'v'));  // a length above one byte's varint
  const std::string bytes = reply.SerializeAsString();
  wire_checked_reply checked("kv.GetReply");
  CHECK(checked.ParseFromString(bytes));
  CHECK(checked.ParseFromString(""));     // the empty message
  CHECK(checked.ParseFromString(bytes));  // reused, as the bench does
  // Cut inside the value: its length runs past the end.
  CHECK_FALSE(checked.ParseFromString(bytes.substr(0, bytes.size() - 1)));
  // A field with wire type 7 does not exist; wire type 4 (end group) with no group open neither.
  CHECK_FALSE(checked.ParseFromString(std::string("\x0f\x01", 2)));
  CHECK_FALSE(checked.ParseFromString(std::string("\x0c", 1)));
}
