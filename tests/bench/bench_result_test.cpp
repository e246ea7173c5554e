#include "bench/common/bench_result.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>
#include <stdexcept>

#include "bench/common/client_options.hpp"

using namespace rdmarpc::bench;

TEST_CASE("to_json writes every field on one line", "[result]") {
  bench_result r;
  r.system = "rdmarpc";
  r.transport = "tcp";
  r.mode = "event";
  r.payload = 4096;
  r.concurrency = 8;
  r.calls = 1000;
  r.seconds = 2;
  r.calls_per_s = 500;
  r.mb_per_s = 2.048;
  r.p50_us = 12.5;
  r.p999_us = 99;
  const auto j = to_json(r);
  REQUIRE(j.find('\n') == std::string::npos);
  REQUIRE(j.find("\"system\":\"rdmarpc\"") != std::string::npos);
  REQUIRE(j.find("\"payload\":4096") != std::string::npos);
  REQUIRE(j.find("\"concurrency\":8") != std::string::npos);
  REQUIRE(j.find("\"calls_per_s\":500") != std::string::npos);
  REQUIRE(j.find("\"p50\":12.5") != std::string::npos);
  REQUIRE(j.find("\"p99.9\":99") != std::string::npos);
  REQUIRE(j.front() == '{');
  REQUIRE(j.back() == '}');
}

TEST_CASE("to_json escapes quotes in labels", "[result]") {
  bench_result r;
  r.system = "a\"b";
  REQUIRE(to_json(r).find("\"system\":\"a\\\"b\"") != std::string::npos);
}

TEST_CASE("print_table prints a header and one row per result", "[result]") {
  bench_result a, b;
  a.system = "grpc";
  a.payload = 1u << 20;
  b.system = "rdmarpc";
  b.payload = 64;
  const bench_result both[] = {a, b};
  std::ostringstream out;
  print_table(out, both);
  const auto s = out.str();
  REQUIRE(std::count(s.begin(), s.end(), '\n') == 3);
  REQUIRE(s.find("p99.9 us") != std::string::npos);
  REQUIRE(s.find("1 MiB") != std::string::npos);
  REQUIRE(s.find("64 B") != std::string::npos);
}

TEST_CASE("sizes and lists parse with K/M suffixes - junk is rejected", "[options]") {
  REQUIRE(parse_size("64") == 64);
  REQUIRE(parse_size("4K") == 4096);
  REQUIRE(parse_size("1M") == 1048576);
  REQUIRE(parse_size_list("64,4K,64K,1M") == std::vector<std::uint64_t>{64, 4096, 65536, 1048576});
  REQUIRE_THROWS_AS(parse_size("x"), std::invalid_argument);
  REQUIRE_THROWS_AS(parse_size("12q"), std::invalid_argument);
  REQUIRE_THROWS_AS(parse_size_list(""), std::invalid_argument);
}

TEST_CASE("client flags parse in both --flag value and --flag=value forms", "[options]") {
  const char* argv[] = {"prog", "--payload=64,1K", "--concurrency", "1,8",     "--calls",
                        "500",  "--warmup",        "0.25",          "--quiet", "--other"};
  arg_reader args(10, const_cast<char**>(argv), 1);
  client_options o;
  while (!args.done() && parse_client_flag(args, o)) {
  }
  REQUIRE(o.payloads == std::vector<std::uint64_t>{64, 1024});
  REQUIRE(o.concurrency == std::vector<std::uint64_t>{1, 8});
  REQUIRE(o.load.calls == 500);
  REQUIRE(o.load.warmup == std::chrono::milliseconds(250));
  REQUIRE_FALSE(o.progress);
  REQUIRE_FALSE(args.done());
  REQUIRE(args.flag() == "--other");  // unknown flags are left for the program

  const char* bad[] = {"prog", "--concurrency", "0"};
  arg_reader bad_args(3, const_cast<char**>(bad), 1);
  REQUIRE_THROWS_AS(parse_client_flag(bad_args, o), std::invalid_argument);
}

TEST_CASE("a server-streaming point says so in its JSON, its label and the table", "[result]") {
  const auto unary = point_result("rdmarpc", "tcp", "event", 64, 1);
  REQUIRE(to_json(unary).find("\"rpc\":\"unary\"") != std::string::npos);
  REQUIRE(point_label(unary) == "rdmarpc tcp 64 B x1");
  const auto stream = point_result("rdmarpc", "rdma", "adaptive", 64, 1, "server_stream");
  REQUIRE(to_json(stream).find("\"rpc\":\"server_stream\"") != std::string::npos);
  REQUIRE(point_label(stream) == "rdmarpc rdma adaptive stream 64 B x1");
  std::ostringstream out;
  print_table(out, std::span(&stream, 1));
  REQUIRE(out.str().find(" stream ") != std::string::npos);
}

TEST_CASE("client options: the stream flag selects server streaming", "[options]") {
  const char* argv[] = {"prog", "--stream", "--payload", "64"};
  arg_reader args(4, const_cast<char**>(argv), 1);
  client_options o;
  REQUIRE_FALSE(o.stream);
  while (!args.done()) REQUIRE(parse_client_flag(args, o));
  REQUIRE(o.stream);
  REQUIRE(o.payloads == std::vector<std::uint64_t>{64});
}
