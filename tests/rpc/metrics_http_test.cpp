// The Prometheus endpoint (server_options::metrics_address) over real tcp: GET /metrics answers
// the figures in the text format (checked by `promtool check metrics`, Debian's prometheus
// package), other paths 404 and other methods 405; scrapers that stall or flood cannot hold up
// the RPC threads; and the endpoint stops with the server.
#include "rpc/metrics_http.hpp"

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "e2e_harness.hpp"
#include "rpc/prometheus_text.hpp"

using namespace rdmarpc;
using namespace rdmarpc::test;
using namespace std::chrono_literals;
using tcp = boost::asio::ip::tcp;

namespace {

tcp::endpoint endpoint_of(const std::string& address) {
  const auto colon = address.rfind(':');
  return {boost::asio::ip::make_address(address.substr(0, colon)),
          static_cast<unsigned short>(std::stoi(address.substr(colon + 1)))};
}

// Sends `request` raw and reads until the server closes: the whole HTTP response.
std::string http_exchange(const std::string& address, const std::string& request) {
  boost::asio::io_context io;
  tcp::socket s(io);
  s.connect(endpoint_of(address));
  boost::asio::write(s, boost::asio::buffer(request));
  std::string out;
  boost::system::error_code ec;
  boost::asio::read(s, boost::asio::dynamic_buffer(out), ec);
  return out;
}

std::string get(const std::string& address, const std::string& target) {
  return http_exchange(address, "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
}

std::string body_of(const std::string& response) {
  const auto at = response.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : response.substr(at + 4);
}

// `promtool check metrics` on `page`: its exit status and what it printed.
std::pair<int, std::string> promtool_check(const std::string& page) {
  const std::string dir = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
  const std::string in = dir + "/rdmarpc-metrics-" + std::to_string(::getpid()) + ".txt";
  const std::string out = in + ".out";
  std::ofstream(in) << page;
  const int rc = std::system(("promtool check metrics < " + in + " > " + out + " 2>&1").c_str());
  std::ifstream f(out);
  std::string printed((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::remove(in.c_str());
  std::remove(out.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, printed};
}

}  // namespace

TEST_CASE("metrics endpoint: GET /metrics serves valid Prometheus text with the server's figures",
          "[metrics][http]") {
  server_options options;
  options.metrics_address = "127.0.0.1:0";
  e2e_harness h("tcp", options);
  const auto address = h.server().metrics_endpoint();
  REQUIRE(address.has_value());
  CHECK(address->rfind("127.0.0.1:", 0) == 0);  // loopback unless told otherwise

  auto ch = h.make_channel();
  for (int i = 0; i < 3; ++i) REQUIRE_FALSE(call(*ch, test_service::echo, make_request("x")).ec);
  REQUIRE(call(*ch, test_service::fail, make_request("x")).ec);

  std::string response, page;
  // The server's end hooks run just after the client has its answer: scrape until they counted.
  for (int i = 0; i < 200; ++i) {
    response = get(*address, "/metrics");
    page = body_of(response);
    if (page.find("rdmarpc_server_calls_finished_total{method=\"/rdmarpc.test.Test/Echo\",code=\"OK\"} 3") !=
        std::string::npos)
      break;
    std::this_thread::sleep_for(10ms);
  }
  CAPTURE(response.substr(0, 400));
  CHECK(response.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(response.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(page.find("rdmarpc_server_calls_started_total{method=\"/rdmarpc.test.Test/Echo\"} 3") !=
        std::string::npos);
  CHECK(page.find("rdmarpc_server_calls_finished_total{method=\"/rdmarpc.test.Test/Echo\",code=\"OK\"} 3") !=
        std::string::npos);
  CHECK(page.find("rdmarpc_server_call_duration_seconds_count{method=\"/rdmarpc.test.Test/Echo\"} 3") !=
        std::string::npos);
  CHECK(page.find("rdmarpc_server_connections 1") != std::string::npos);
  CHECK(page.find("rdmarpc_connection_rnr_errors_total{peer=\"tcp://127.0.0.1:") != std::string::npos);

  const auto [rc, printed] = promtool_check(page);
  INFO("promtool printed: " << printed);
  INFO("(promtool comes with Debian's prometheus package: scripts/install-deps.sh installs it)");
  CHECK(rc == 0);
}

TEST_CASE("metrics endpoint: only GET /metrics, other paths 404, other methods 405", "[metrics][http]") {
  server_options options;
  options.metrics_address = "127.0.0.1:0";
  e2e_harness h("tcp", options);
  const auto address = *h.server().metrics_endpoint();
  CHECK(get(address, "/").rfind("HTTP/1.1 404", 0) == 0);
  CHECK(get(address, "/metrics/../admin").rfind("HTTP/1.1 404", 0) == 0);
  const auto post =
      http_exchange(address, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
  CHECK(post.rfind("HTTP/1.1 405", 0) == 0);
  CHECK(post.find("Allow: GET") != std::string::npos);
  CHECK(http_exchange(address, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 405", 0) == 0);
  // Garbage is dropped without an answer, and the endpoint carries on.
  CHECK(http_exchange(address, "\x01\x02 not http\r\n\r\n").empty());
  CHECK(get(address, "/metrics").rfind("HTTP/1.1 200", 0) == 0);
}

TEST_CASE("metrics endpoint: stalled scrapers cost the endpoint thread only, calls carry on",
          "[metrics][http]") {
  server_options options;
  options.metrics_address = "127.0.0.1:0";
  options.threads = 1;
  e2e_harness h("tcp", options);
  const auto address = *h.server().metrics_endpoint();
  boost::asio::io_context io;
  std::vector<tcp::socket> stalled;
  // More than the endpoint serves at once: each sends half a request and stops.
  for (std::size_t i = 0; i < metrics_http::kMaxScrapers + 4; ++i) {
    stalled.emplace_back(io);
    stalled.back().connect(endpoint_of(address));
    boost::asio::write(stalled.back(), boost::asio::buffer(std::string("GET /metr")));
  }
  auto ch = h.make_channel();
  for (int i = 0; i < 50; ++i)
    REQUIRE_FALSE(call(*ch, test_service::echo, make_request("x"), nullptr, 10s).ec);
  // Once they are gone, scrapes are answered again.
  stalled.clear();
  std::string response;
  for (int i = 0; i < 500 && response.rfind("HTTP/1.1 200", 0) != 0; ++i) {
    response = get(address, "/metrics");
    if (response.rfind("HTTP/1.1 200", 0) != 0) std::this_thread::sleep_for(10ms);
  }
  CHECK(response.rfind("HTTP/1.1 200", 0) == 0);
}

TEST_CASE("metrics endpoint: a flood of scrapes shares collections, every scrape is answered",
          "[metrics][http]") {
  // The renderer stands for the server's: each call is one collection (a task on every RPC thread).
  std::atomic<int> collections{0};
  const auto render = [&](std::function<void(metrics_http::page)> done) {
    const int n = ++collections;
    done([n] { return "collection " + std::to_string(n) + "\n"; });
  };
  const auto started = std::chrono::steady_clock::now();
  int answered = 0, refused = 0;
  {
    metrics_http endpoint("127.0.0.1:0", render);
    // 8 scrapers, each scraping in a loop as fast as it can (below kMaxScrapers: none is refused).
    std::vector<std::thread> scrapers;
    std::mutex m;
    for (int t = 0; t < 8; ++t) {
      scrapers.emplace_back([&] {
        for (int i = 0; i < 25; ++i) {
          const bool ok = get(endpoint.address(), "/metrics").rfind("HTTP/1.1 200", 0) == 0;
          const std::lock_guard lock(m);
          ++(ok ? answered : refused);
        }
      });
    }
    for (auto& t : scrapers) t.join();
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  CHECK(answered == 200);
  CHECK(refused == 0);
  // At most one collection per kMinCollectionInterval, however fast the scrapers ask (a bound by
  // construction: a slow machine only makes it looser).
  CHECK(collections.load() <= 1 + elapsed / metrics_http::kMinCollectionInterval);
  CHECK(collections.load() < 200);
}

TEST_CASE("metrics endpoint: a malformed address is refused with a clear error", "[metrics][http]") {
  const auto render = [](std::function<void(metrics_http::page)> done) {
    done([] { return std::string(); });
  };
  for (const char* bad : {"localhost", "127.0.0.1:", "127.0.0.1:99999", "nohost:80", "1.2.3.4:x"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH(metrics_http(bad, render), Catch::Contains("expected host:port"));
  }
  metrics_http v6("[::1]:0", render);
  CHECK(v6.address().rfind("[::1]:", 0) == 0);
  // No host: loopback, never every interface.
  metrics_http hostless(":0", render);
  CHECK(hostless.address().rfind("127.0.0.1:", 0) == 0);
}

TEST_CASE("prometheus_text: label values are escaped, unknown methods named, empty parts left out",
          "[metrics]") {
  method_stats m;
  m.name = "/a\"b\\c/D";
  m.started = 2;
  m.finished[0] = 1;
  m.finished[static_cast<std::size_t>(status_code::not_found)] = 1;
  method_stats unknown;
  unknown.started = 1;
  const auto page = prometheus_text(server_stats{}, {m, unknown}, {});
  CHECK(page.find("rdmarpc_server_calls_started_total{method=\"/a\\\"b\\\\c/D\"} 2") != std::string::npos);
  CHECK(page.find("code=\"NOT_FOUND\"} 1") != std::string::npos);
  CHECK(page.find("code=\"ABORTED\"") == std::string::npos);
  CHECK(page.find("method=\"unknown\"") != std::string::npos);
  CHECK(page.find("rdmarpc_connection_") == std::string::npos);
  const auto [rc, printed] = promtool_check(page);
  INFO("promtool printed: " << printed);
  CHECK(rc == 0);
}
