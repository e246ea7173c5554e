// Unit tests of cm_pingpong's command-line parser (examples/cm_pingpong/options.hpp).
#include "cm_pingpong/options.hpp"

#include <catch2/catch.hpp>
#include <string_view>
#include <vector>

using cm_pingpong::options;
using cm_pingpong::parse_options;
using cm_pingpong::usage_error;

namespace {
options parse(std::vector<std::string_view> args) {
  return parse_options(args);
}
}  // namespace

TEST_CASE("cm_pingpong options: defaults target the VM's rxe0 address", "[testbed][options]") {
  const options o = parse({"server"});
  CHECK(o.mode == cm_pingpong::mode::server);
  CHECK(o.address == "10.0.0.1");
  CHECK(o.port == 7471);
  CHECK(o.iterations == 1000);
  CHECK(o.size == 64);
  CHECK_FALSE(o.help);
}

TEST_CASE("cm_pingpong options: every option, long and short", "[testbed][options]") {
  const options l = parse({"client", "--address", "192.168.1.2", "--port", "9000", "--iterations", "5",
                           "--size", "4096", "--timeout-ms", "250"});
  CHECK(l.mode == cm_pingpong::mode::client);
  CHECK(l.address == "192.168.1.2");
  CHECK(l.port == 9000);
  CHECK(l.iterations == 5);
  CHECK(l.size == 4096);
  CHECK(l.timeout == std::chrono::milliseconds(250));

  const options s = parse({"-a", "10.1.1.1", "-p", "1", "-n", "7", "-s", "8", "-t", "3", "server"});
  CHECK(s.mode == cm_pingpong::mode::server);
  CHECK(s.address == "10.1.1.1");
  CHECK(s.port == 1);
  CHECK(s.iterations == 7);
  CHECK(s.size == cm_pingpong::kMinSize);
  CHECK(s.timeout == std::chrono::milliseconds(3));
}

TEST_CASE("cm_pingpong options: a server may ask for any port, a client may not", "[testbed][options]") {
  CHECK(parse({"server", "-p", "0"}).port == 0);
  CHECK_THROWS_AS(parse({"client", "-p", "0"}), usage_error);
}

TEST_CASE("cm_pingpong options: --help wins over everything else", "[testbed][options]") {
  CHECK(parse({"--help"}).help);
  CHECK(parse({"client", "-h", "--bogus"}).help);
}

TEST_CASE("cm_pingpong options: malformed command lines are rejected", "[testbed][options]") {
  const std::vector<std::vector<std::string_view>> bad = {
      {},                               // no mode
      {"both"},                         // unknown mode
      {"server", "client"},             // two modes
      {"server", "--port"},             // missing value
      {"server", "--port", "65536"},    // out of range
      {"server", "--port", "-1"},       // negative
      {"server", "--port", "12ab"},     // trailing junk
      {"server", "--port", ""},         // empty number
      {"server", "--iterations", "0"},  // zero round trips
      {"server", "--size", "7"},        // no room for the sequence number
      {"server", "--size", "1048577"},  // above kMaxSize
      {"server", "--timeout-ms", "0"},  // no time at all
      {"server", "--address", ""},      // empty address
      {"server", "--frobnicate", "1"},  // unknown option
  };
  for (const auto& args : bad) {
    INFO("argument count " << args.size() << (args.empty() ? "" : ", last: " + std::string(args.back())));
    CHECK_THROWS_AS(parse(args), usage_error);
  }
}

TEST_CASE("cm_pingpong options: usage names both modes and the program", "[testbed][options]") {
  const std::string text = cm_pingpong::usage("prog");
  CHECK(text.starts_with("usage: prog server|client"));
  CHECK(text.find("--iterations") != std::string::npos);
}
