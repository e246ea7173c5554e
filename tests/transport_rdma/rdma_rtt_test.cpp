// The 64 B ping-pong RTT between two processes, like ib_send_lat, in each polling mode: printed,
// never asserted (tests/rdma_suite.sh prints it next to ib_send_lat's). A binary of its own, run
// with no other test beside it (SERIAL): busy and adaptive polling spin, and beside another test
// on the VM's two vCPUs a 2-second case took half a minute. Label rdma (VM only).

#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <vector>

#include "tests/transport_rdma/child_process.hpp"
#include "tests/transport_rdma/rdma_test_support.hpp"

using namespace rdmarpc;
using namespace rdmarpc::rdma_test;

namespace {

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

// 64 B ping-pong between two processes (like ib_send_lat); prints the RTT, asserts only delivery.
void measure_rtt(std::uint16_t port, transport::cq_polling polling) {
  transport::connection_options options;
  options.polling = polling;
  const bool busy_poll = polling == transport::cq_polling::busy;
  child_process child = child_process::spawn([&](int, int to_parent) {
    boost::asio::io_context io;
    auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(port), options);
    std::shared_ptr<transport::connection> conn;
    listener->async_accept(io.get_executor(),
                           [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             if (!ec) conn = std::move(c);
                           });
    if (::write(to_parent, "l", 1) != 1) return 2;
    if (!run_until(io, [&] { return conn != nullptr; })) return 3;
    auto rec = std::make_shared<recorder>();
    std::weak_ptr<transport::connection> weak = conn;
    rec->on_each = [weak](transport::received_message& m) {
      if (auto c = weak.lock()) (void)c->send_copy(boost::asio::buffer(m.bytes().data(), m.size()));
    };
    conn->start(rec);
    const bool closed = run_until(
        io, [&] { return rec->closed.has_value(); }, std::chrono::seconds(120));
    if (!closed)
      std::fprintf(stderr, "child: no close seen (messages %llu)\n",
                   static_cast<unsigned long long>(conn->stats().messages_received));
    return closed ? 0 : 4;
  });
  char ready = 0;
  REQUIRE(read_byte(child.from_child, ready, 30000));

  boost::asio::io_context io;
  std::shared_ptr<transport::connection> conn;
  transport::rdma::async_connect(io.get_executor(), rdma_endpoint(port), options,
                                 [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                                   REQUIRE_FALSE(ec);
                                   conn = std::move(c);
                                 });
  REQUIRE(run_until(io, [&] { return conn != nullptr; }));
  auto rec = std::make_shared<recorder>();
  std::size_t replies = 0;
  rec->on_each = [&](transport::received_message& m) {
    if (m.size() == 64) ++replies;
  };
  conn->start(rec);
  const auto msg = pattern(64, 1);
  constexpr int kWarmup = 200, kRounds = 5000;
  std::vector<double> rtts;
  rtts.reserve(kRounds);
  for (int i = 0; i < kWarmup + kRounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE_FALSE(conn->send_copy(boost::asio::buffer(msg)));
    const std::size_t want = static_cast<std::size_t>(i) + 1;
    if (busy_poll) {                   // spin like ib_send_lat does, bounded
      if (io.stopped()) io.restart();  // run_until may have left it stopped: poll_one would do nothing
      const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (replies < want && !rec->closed && std::chrono::steady_clock::now() < limit) io.poll_one();
    }
    REQUIRE(run_until(
        io, [&] { return replies >= want; }, std::chrono::seconds(10)));
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= kWarmup) rtts.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  double sum = 0;
  for (double r : rtts) sum += r;
  std::printf(
      "rdmarpc 64 B ping-pong RTT (%s, 2 processes, %d rounds): median %.1f us, mean %.1f us, p99 %.1f us\n",
      busy_poll                                    ? "busy_poll"
      : polling == transport::cq_polling::adaptive ? "adaptive"
                                                   : "event mode",
      kRounds, percentile(rtts, 0.5), sum / kRounds, percentile(rtts, 0.99));
  std::fflush(stdout);
  CHECK(replies == static_cast<std::size_t>(kWarmup + kRounds));
  CHECK(conn->stats().rnr_errors == 0);
  conn->close();
  CHECK(run_until(
      io, [&] { return rec->closed.has_value(); }, std::chrono::seconds(10)));
  // The child exits once it sees the disconnect; bounded wait, then ~child_process kills it.
  int status = -1;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (::waitpid(child.pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < limit) {
    run_until(
        io, [] { return false; }, std::chrono::milliseconds(50));
  }
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  if (WIFEXITED(status)) child.pid = -1;
}

}  // namespace

TEST_CASE("rdma 64 B ping-pong RTT between two processes (event mode)") {
  measure_rtt(7513, transport::cq_polling::event);
}
TEST_CASE("rdma 64 B ping-pong RTT between two processes (busy poll)") {
  measure_rtt(7514, transport::cq_polling::busy);
}
TEST_CASE("rdma 64 B ping-pong RTT between two processes (adaptive)") {
  measure_rtt(7515, transport::cq_polling::adaptive);
}
