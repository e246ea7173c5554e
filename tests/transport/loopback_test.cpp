// The connection contract over the in-memory loopback pair, plus its fault injection (drop, delay,
// corrupt, break at message #N), capacity back-pressure and ends on two threads.
#include <atomic>
#include <boost/asio/post.hpp>
#include <thread>

#include "tests/transport/connection_contract.hpp"
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;
using test::recording_handler;
using test::run_until;
namespace loopback = transport::loopback;

namespace {

test::connected_pair make_pair(boost::asio::io_context& io, const transport::connection_options& options) {
  loopback::loopback_options lo;
  lo.connection = options;
  lo.capacity = 16;  // a small "receive ring", so an unstarted peer pushes back quickly
  auto [a, b] = loopback::make_loopback_pair(io.get_executor(), io.get_executor(), lo);
  return {a, b};
}

struct started_pair {
  std::shared_ptr<transport::connection> a, b;
  std::shared_ptr<recording_handler> ha = std::make_shared<recording_handler>();
  std::shared_ptr<recording_handler> hb = std::make_shared<recording_handler>();
};

started_pair start_pair(boost::asio::io_context& io, const loopback::loopback_options& options) {
  started_pair p;
  std::tie(p.a, p.b) = loopback::make_loopback_pair(io.get_executor(), io.get_executor(), options);
  p.a->start(p.ha);
  p.b->start(p.hb);
  return p;
}

std::vector<std::uint64_t> indices(const recording_handler& h) {
  std::vector<std::uint64_t> out;
  for (const auto& m : h.messages) out.push_back(m.empty() ? ~0ull : static_cast<std::uint64_t>(m[0]));
  return out;
}

void send_numbered(transport::connection& c, int from, int to, std::size_t size = 32) {
  for (int i = from; i <= to; ++i) REQUIRE_FALSE(test::send_bytes(c, test::make_message(i, size)));
}

}  // namespace

RDMARPC_CONNECTION_CONTRACT_TESTS("loopback", "[loopback]", make_pair)

TEST_CASE("loopback: receive drop_at=3 / expect messages 1,2,4,5 and the counters say 5 sent",
          "[loopback][fault]") {
  boost::asio::io_context io;
  loopback::loopback_options options;
  options.a_to_b.drop_at = 3;
  auto p = start_pair(io, options);
  send_numbered(*p.a, 1, 5);
  REQUIRE(run_until(io, [&] { return p.hb->messages.size() == 4 && p.a->stats().messages_sent == 5; }));
  CHECK(indices(*p.hb) == std::vector<std::uint64_t>{1, 2, 4, 5});
  CHECK(p.b->stats().messages_received == 4);
  // The other direction is untouched.
  send_numbered(*p.b, 1, 5);
  REQUIRE(run_until(io, [&] { return p.ha->messages.size() == 5; }));
  CHECK(indices(*p.ha) == std::vector<std::uint64_t>{1, 2, 3, 4, 5});
}

TEST_CASE("loopback: receive delay_at=2 / expect #2 and everything behind it held back, order kept",
          "[loopback][fault]") {
  boost::asio::io_context io;
  loopback::loopback_options options;
  options.a_to_b.delay_at = 2;
  options.a_to_b.delay = std::chrono::milliseconds(500);
  auto p = start_pair(io, options);
  std::vector<std::chrono::steady_clock::time_point> arrivals;
  p.hb->on_message_hook = [&](std::size_t) { arrivals.push_back(std::chrono::steady_clock::now()); };
  const auto sent_at = std::chrono::steady_clock::now();
  send_numbered(*p.a, 1, 4);
  REQUIRE(run_until(io, [&] { return p.hb->messages.size() >= 1; }));
  test::run_ready(io);
  CHECK(p.hb->messages.size() == 1);  // #2 is waiting on its timer, #3 and #4 behind it
  REQUIRE(run_until(io, [&] { return p.hb->messages.size() == 4; }));
  CHECK(indices(*p.hb) == std::vector<std::uint64_t>{1, 2, 3, 4});
  // A timer cannot fire early: this is the fault working, not a latency assertion.
  CHECK(arrivals[1] - sent_at >= std::chrono::milliseconds(500));
}

TEST_CASE("loopback: receive corrupt_at=2 / expect #2 inverted, same length", "[loopback][fault]") {
  boost::asio::io_context io;
  loopback::loopback_options options;
  options.a_to_b.corrupt_at = 2;
  auto p = start_pair(io, options);
  send_numbered(*p.a, 1, 3, 40);
  REQUIRE(run_until(io, [&] { return p.hb->messages.size() == 3; }));
  CHECK(test::is_message(p.hb->messages[0], 1, 40));
  CHECK(test::is_message(p.hb->messages[2], 3, 40));
  auto expected = test::make_message(2, 40);
  for (auto& b : expected) b = ~b;
  CHECK(p.hb->messages[1] == expected);
}

TEST_CASE("loopback: receive close_at=3 / expect 1,2 delivered then connection_lost on both ends",
          "[loopback][fault]") {
  boost::asio::io_context io;
  loopback::loopback_options options;
  options.a_to_b.close_at = 3;
  auto p = start_pair(io, options);
  send_numbered(*p.a, 1, 3);  // #3 breaks the link as it is handed over
  CHECK(test::send_bytes(*p.a, test::make_message(4, 32)) == transport::errc::not_connected);
  REQUIRE(run_until(io, [&] { return p.ha->close_calls == 1 && p.hb->close_calls == 1; }));
  CHECK(indices(*p.hb) == std::vector<std::uint64_t>{1, 2});
  CHECK(p.ha->close_reason == transport::errc::connection_lost);
  CHECK(p.hb->close_reason == transport::errc::connection_lost);
  CHECK_FALSE(p.a->is_open());
  CHECK(test::send_bytes(*p.b, test::make_message(0, 1)) == transport::errc::not_connected);
}

TEST_CASE("loopback: max_message_size is enforced", "[loopback][fault]") {
  boost::asio::io_context io;
  loopback::loopback_options options;
  options.connection.max_message_size = 100;
  auto p = start_pair(io, options);
  CHECK(test::send_bytes(*p.a, test::make_message(1, 101)) == transport::errc::message_too_large);
  CHECK_FALSE(test::send_bytes(*p.a, test::make_message(2, 100)));
  REQUIRE(run_until(io, [&] { return p.hb->messages.size() == 1; }));
  CHECK(test::is_message(p.hb->messages[0], 2, 100));
}

TEST_CASE("loopback: receive capacity reached / expect queue full and writable only once the peer consumes",
          "[loopback][capacity]") {
  boost::asio::io_context io;
  loopback::loopback_options options;
  options.capacity = 3;
  options.connection.send_queue_bytes = 16;  // two 8-byte messages
  auto [a, b] = loopback::make_loopback_pair(io.get_executor(), io.get_executor(), options);
  auto ha = std::make_shared<recording_handler>();
  a->start(ha);  // b not started: consumes nothing
  int accepted = 0;
  while (!test::send_bytes(*a, test::make_message(accepted, 8))) {
    ++accepted;
    test::run_ready(io);
    REQUIRE(accepted < 100);
  }
  CHECK(accepted == 5);  // 3 in the peer's "ring" + 2 in our queue
  std::optional<boost::system::error_code> writable;
  a->async_reserve(8, [&](boost::system::error_code e, transport::send_reservation) { writable = e; });
  test::run_ready(io);
  CHECK_FALSE(writable);  // deterministic here: nothing can move until b consumes
  auto hb = std::make_shared<recording_handler>();
  b->start(hb);
  REQUIRE(run_until(io, [&] { return writable.has_value() && hb->messages.size() == 5; }));
  CHECK_FALSE(*writable);
}

TEST_CASE("loopback: dropping one end without close looks like a crashed peer", "[loopback]") {
  boost::asio::io_context io;
  auto p = start_pair(io, {});
  send_numbered(*p.a, 1, 2);
  REQUIRE(run_until(io, [&] { return p.hb->messages.size() == 2; }));
  p.a.reset();  // nothing is pending on it, so this destroys it
  REQUIRE(run_until(io, [&] { return p.hb->close_calls == 1; }));
  CHECK(p.hb->close_reason == transport::errc::connection_lost);
}

TEST_CASE("loopback: a peer that closes before being started still delivers, then closed_by_peer",
          "[loopback]") {
  boost::asio::io_context io;
  auto [a, b] = loopback::make_loopback_pair(io.get_executor(), io.get_executor());
  auto ha = std::make_shared<recording_handler>();
  a->start(ha);
  send_numbered(*a, 1, 3);
  a->close();
  REQUIRE(run_until(io, [&] { return ha->close_calls == 1; }));
  auto hb = std::make_shared<recording_handler>();
  b->start(hb);
  REQUIRE(run_until(io, [&] { return hb->close_calls == 1; }));
  CHECK(indices(*hb) == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(hb->close_reason == transport::errc::closed_by_peer);
}

TEST_CASE("loopback: ends on two io_contexts run by two threads", "[loopback][threads]") {
  boost::asio::io_context io_a, io_b;
  loopback::loopback_options options;
  options.capacity = 8;
  options.connection.send_queue_bytes = 16 * 64;
  auto [a, b] = loopback::make_loopback_pair(io_a.get_executor(), io_b.get_executor(), options);
  constexpr std::uint64_t kCount = 20000;
  // b echoes everything back (on its own thread); a counts the echoes.
  struct echo final : transport::connection_handler {
    std::shared_ptr<transport::connection> self;
    void on_message(transport::received_message m) override {
      const std::vector<std::byte> copy(m.bytes().begin(), m.bytes().end());
      m.release();
      // Queue overflow would be a test bug: a's queue bounds b's inbound, and b's limit is as large.
      pending.push_back(copy);
      flush();
    }
    void flush() {
      if (waiting) return;  // the granted reservation takes the front first
      while (!pending.empty()) {
        const auto ec = test::send_bytes(*self, pending.front());
        if (ec == boost::asio::error::would_block) {
          if (!waiting) {
            waiting = true;
            self->async_reserve(pending.front().size(),
                                [this](boost::system::error_code e, transport::send_reservation r) {
                                  waiting = false;
                                  if (e) return;
                                  test::commit_bytes(std::move(r), pending.front());
                                  pending.erase(pending.begin());
                                  flush();
                                });
          }
          return;
        }
        pending.erase(pending.begin());
      }
    }
    void on_close(const boost::system::error_code& r) override {
      reason = r;
      closed = true;
    }
    std::vector<std::vector<std::byte>> pending;
    bool waiting = false;
    std::atomic<bool> closed{false};
    boost::system::error_code reason;
  };
  auto eh = std::make_shared<echo>();
  eh->self = b;
  auto ha = std::make_shared<recording_handler>();
  std::atomic<bool> done{false};
  ha->on_message_hook = [&](std::size_t n) {
    if (n == kCount) done = true;
  };
  auto work_b = boost::asio::make_work_guard(io_b);
  std::thread thread_b([&] { io_b.run(); });
  boost::asio::post(io_b, [&] { b->start(eh); });
  a->start(ha);
  auto sender = std::make_shared<test::blaster>(
      a, kCount, [](std::uint64_t i) { return static_cast<std::size_t>(i % 64); });
  sender->run();
  const bool all = run_until(io_a, [&] { return done.load() || sender->error; });
  a->close();
  const bool closed = run_until(io_a, [&] { return ha->close_calls == 1 && eh->closed.load(); });
  work_b.reset();
  thread_b.join();
  REQUIRE(all);
  REQUIRE_FALSE(sender->error);
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < kCount; ++i) bad += test::is_message(ha->messages[i], i, i % 64) ? 0 : 1;
  CHECK(bad == 0);
  REQUIRE(closed);
  CHECK(ha->close_reason == transport::errc::closed_locally);
  CHECK(eh->reason == transport::errc::closed_by_peer);
}
