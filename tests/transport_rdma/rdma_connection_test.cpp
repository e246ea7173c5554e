// The rdma connection over a real device: ping-pong, message sizes around the slot size, graceful
// close from either side, a credit-stall blast (and the same blast without credits hitting RNR),
// and 100 concurrent connections. Runs inside the Soft-RoCE VM (label rdma).

#include "transport/rdma/rdma_connection.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <deque>
#include <optional>

#include "tests/transport_rdma/rdma_test_support.hpp"
#include "transport/connect.hpp"
#include "transport/rdma/qp_resources.hpp"

using namespace rdmarpc;
using namespace rdmarpc::rdma_test;
using transport::errc;

namespace {

std::uint64_t read_seq(std::span<const std::byte> bytes) {
  std::uint64_t v = 0;
  std::memcpy(&v, bytes.data(), std::min(sizeof v, bytes.size()));
  return v;
}

// Echo every message back on `conn` (server side of several tests).
void start_echo(const std::shared_ptr<transport::connection>& conn, const std::shared_ptr<recorder>& rec) {
  std::weak_ptr<transport::connection> weak = conn;
  rec->on_each = [weak](transport::received_message& m) {
    if (auto c = weak.lock()) (void)c->send_copy(boost::asio::buffer(m.bytes().data(), m.size()));
  };
  conn->start(rec);
}

}  // namespace

TEST_CASE("rdma ping-pong delivers every reply intact") {
  boost::asio::io_context io;
  auto p = connect_pair(io, 7501);
  start_echo(p.server, p.server_rec);
  p.client->start(p.client_rec);
  REQUIRE(p.client->is_open());
  REQUIRE(p.client->remote_address().rfind("rdma://10.0.0.1:", 0) == 0);

  constexpr int kRounds = 500;
  for (int i = 0; i < kRounds; ++i) {
    const auto msg = pattern(64, static_cast<unsigned>(i));
    REQUIRE_FALSE(p.client->send_copy(boost::asio::buffer(msg)));
    REQUIRE(run_until(io, [&] { return p.client_rec->messages.size() == static_cast<std::size_t>(i + 1); }));
    REQUIRE(p.client_rec->messages.back() == msg);
  }
  CHECK(p.client->stats().messages_sent == kRounds);
  CHECK(p.client->stats().messages_received == kRounds);
  CHECK(p.server->stats().messages_received == kRounds);
  CHECK(p.client->stats().rnr_errors == 0);
  CHECK(p.client->stats().cq_wakeups > 0);
  CHECK(p.server->stats().reposts > 0);

  p.client->close();
  REQUIRE(run_until(io, [&] { return p.client_rec->closed && p.server_rec->closed; }));
  CHECK(*p.client_rec->closed == errc::closed_locally);
  CHECK(*p.server_rec->closed == errc::closed_by_peer);
  CHECK(p.client->send_copy(boost::asio::buffer(pattern(8, 0))) == errc::not_connected);
}

TEST_CASE(
    "rdma messages of 1 B, a receive head and one byte more, exactly one slot, one slot + 1 and 16 MiB "
    "arrive intact") {
  boost::asio::io_context io;
  transport::connection_options options;
  options.slot_size = 4096;
  options.reassembly_timeout = std::chrono::seconds(60);  // 16 MiB in 4096 fragments, on a slow machine
  auto p = connect_pair(io, 7502, options, options);
  p.server->start(p.server_rec);
  p.client->start(p.client_rec);

  // Up to a receive head a message is read where it landed; one byte more and its head is copied in
  // front of the rest in the slot (qp_resources::received).
  constexpr std::size_t head = transport::rdma::qp_resources::kRecvHeadBytes;
  const std::vector<std::size_t> sizes{1, head, head + 1, 4096, 4097, 3 * 4096, 16u << 20, 0};
  std::size_t expected = 0;
  for (std::size_t size : sizes) {
    INFO("size " << size);
    const auto msg = pattern(size, static_cast<unsigned>(size));
    // Gathered from two parts, to exercise the copy across part boundaries.
    const std::size_t half = size / 2;
    const std::array<boost::asio::const_buffer, 2> parts{boost::asio::buffer(msg.data(), half),
                                                         boost::asio::buffer(msg.data() + half, size - half)};
    REQUIRE_FALSE(p.client->send_copy(parts));
    ++expected;
    REQUIRE(run_until(
        io, [&] { return p.server_rec->messages.size() == expected; }, std::chrono::seconds(120)));
    REQUIRE(p.server_rec->messages.back().size() == size);
    REQUIRE(p.server_rec->messages.back() == msg);
  }
  CHECK(p.client->max_message_size() == (16u << 20));
  const std::vector<std::byte> too_big((16u << 20) + 1);
  CHECK(p.client->send_copy(boost::asio::buffer(too_big)) == errc::message_too_large);
  CHECK(p.client->stats().rnr_errors == 0);
  CHECK(p.server->stats().rnr_errors == 0);

  // Server-initiated close this time.
  p.server->close();
  REQUIRE(run_until(io, [&] { return p.client_rec->closed && p.server_rec->closed; }));
  CHECK(*p.server_rec->closed == errc::closed_locally);
  CHECK(*p.client_rec->closed == errc::closed_by_peer);
}

// Unsignaled sends pin their ring entries until a signaled one completes. The rule that signals
// one at least every eighth of the ring must count ring space (entries start on 64 B lines), not
// payload: 15 one-byte sends on a 1 KiB ring pin 960 B, and with nothing signaled (fewer than
// signal_every, no credits coming back from a silent peer) a 100 B reservation would wait for ever.
TEST_CASE("rdma tiny unsignaled sends cannot pin the send ring: a reservation after them is granted") {
  boost::asio::io_context io;
  transport::connection_options options;
  options.slot_size = 64;
  options.send_buffers = 16;  // a 1 KiB send ring
  options.signal_every = 16;
  auto p = connect_pair(io, 7508, options, options);
  p.server->start(p.server_rec);
  p.client->start(p.client_rec);
  const std::byte one{1};
  for (int i = 0; i < 15; ++i) REQUIRE_FALSE(p.client->send_copy(boost::asio::buffer(&one, 1)));
  std::optional<boost::system::error_code> granted;
  p.client->async_reserve(100, [&](boost::system::error_code ec, transport::send_reservation r) {
    granted = ec;
    if (!ec) r.commit(100);
  });
  REQUIRE(run_until(io, [&] { return granted.has_value(); }));
  CHECK_FALSE(*granted);
  REQUIRE(run_until(io, [&] { return p.server_rec->messages.size() == 16; }));
  CHECK(p.server_rec->messages.back().size() == 100);
  CHECK(p.client->stats().rnr_errors == 0);
}

TEST_CASE("rdma close flushes messages already accepted by send") {
  boost::asio::io_context io;
  auto p = connect_pair(io, 7503);
  p.server->start(p.server_rec);
  p.client->start(p.client_rec);
  constexpr int kCount = 300;  // more than the peer's ring: some wait for credits in the queue
  for (int i = 0; i < kCount; ++i) {
    std::uint64_t seq = static_cast<std::uint64_t>(i);
    REQUIRE_FALSE(p.client->send_copy(boost::asio::buffer(&seq, sizeof seq)));
  }
  p.client->close();
  REQUIRE(run_until(io, [&] { return p.server_rec->closed.has_value(); }));
  REQUIRE(p.server_rec->messages.size() == kCount);
  for (int i = 0; i < kCount; ++i)
    CHECK(read_seq(p.server_rec->messages[static_cast<std::size_t>(i)]) == static_cast<std::uint64_t>(i));
  CHECK(*p.server_rec->closed == errc::closed_by_peer);
  REQUIRE(run_until(io, [&] { return p.client_rec->closed.has_value(); }));
  CHECK(*p.client_rec->closed == errc::closed_locally);
}

namespace {

// Sends `total` 16-byte sequence-numbered messages as fast as the connection takes them.
struct blaster {
  std::shared_ptr<transport::connection> conn;
  std::uint64_t total;
  std::uint64_t sent = 0;
  boost::system::error_code error;

  void pump() {
    while (sent < total) {
      std::array<std::uint64_t, 2> msg{sent, ~sent};
      const auto ec = conn->send_copy(boost::asio::buffer(msg));
      if (ec == boost::asio::error::would_block) {
        conn->async_reserve(sizeof msg, [this](boost::system::error_code wec, transport::send_reservation r) {
          if (wec) {
            error = wec;
            return;
          }
          const std::array<std::uint64_t, 2> next{sent, ~sent};
          std::memcpy(r.data().data(), next.data(), sizeof next);
          r.commit();
          ++sent;
          pump();
        });
        return;
      }
      if (ec) {
        error = ec;
        return;
      }
      ++sent;
    }
  }
};

}  // namespace

TEST_CASE("rdma blast of 10^6 messages to a stalling receiver: in order, no RNR, credit stalls") {
  boost::asio::io_context io;
  auto p = connect_pair(io, 7504);
  const std::uint32_t depth = transport::connection_options{}.recv_ring_depth;

  std::uint64_t next = 0;
  std::uint64_t out_of_order = 0;
  std::deque<transport::received_message> held;
  bool stalled_once = false;
  std::size_t max_held = 0;
  boost::asio::steady_timer stall_timer(io);
  p.server_rec->on_each = [&](transport::received_message& m) {
    const auto bytes = m.bytes();
    std::array<std::uint64_t, 2> v{};
    if (bytes.size() == sizeof v) std::memcpy(v.data(), bytes.data(), sizeof v);
    if (bytes.size() != sizeof v || v[0] != next || v[1] != ~next) ++out_of_order;
    ++next;
    if (stalled_once) return;  // released on return (m is destroyed by the caller)
    // Stall: hold every message (its slot stays consumed) until the sender ran out of credits,
    // stay stalled a while, then drain.
    held.push_back(std::move(m));
    max_held = std::max(max_held, held.size());
    if (held.size() == depth - 1) {
      stall_timer.expires_after(std::chrono::milliseconds(300));
      stall_timer.async_wait([&](boost::system::error_code) {
        stalled_once = true;
        held.clear();
      });
    }
  };
  p.server->start(p.server_rec);
  p.client->start(p.client_rec);

  blaster b{p.client, 1'000'000};
  boost::asio::post(io, [&] { b.pump(); });
  REQUIRE(run_until(
      io, [&] { return next == b.total || b.error || p.server_rec->closed || p.client_rec->closed; },
      std::chrono::seconds(240)));
  CHECK_FALSE(b.error);
  CHECK_FALSE(p.server_rec->closed);
  CHECK_FALSE(p.client_rec->closed);
  REQUIRE(next == b.total);
  CHECK(out_of_order == 0);
  CHECK(max_held == depth - 1);  // the sender never had more than depth - reserved in flight
  const auto& cs = p.client->stats();
  const auto& ss = p.server->stats();
  CHECK(cs.rnr_errors == 0);
  CHECK(ss.rnr_errors == 0);
  CHECK(cs.credit_stalls > 0);
  CHECK(cs.messages_sent == b.total);
  CHECK(ss.messages_received == b.total);
  CHECK(ss.credit_only_messages > 0);
  CHECK(ss.reposts >= b.total - depth);
  std::printf(
      "blast: %llu messages, client credit_stalls=%llu cq_wakeups=%llu; server credit_only=%llu "
      "reposts=%llu cq_wakeups=%llu\n",
      static_cast<unsigned long long>(b.total), static_cast<unsigned long long>(cs.credit_stalls),
      static_cast<unsigned long long>(cs.cq_wakeups),
      static_cast<unsigned long long>(ss.credit_only_messages), static_cast<unsigned long long>(ss.reposts),
      static_cast<unsigned long long>(ss.cq_wakeups));
  p.client->close();
  REQUIRE(run_until(io, [&] { return p.client_rec->closed && p.server_rec->closed; }));
}

TEST_CASE("rdma blast with credits disabled overruns the receiver and fails with RNR") {
  boost::asio::io_context io;
  auto p = connect_pair(io, 7505);
  auto raw = std::dynamic_pointer_cast<transport::rdma::rdma_connection>(p.client);
  REQUIRE(raw);
  raw->send_without_credits_for_testing();
  std::deque<transport::received_message> held;  // never released: the ring empties
  p.server_rec->on_each = [&](transport::received_message& m) { held.push_back(std::move(m)); };
  p.server->start(p.server_rec);
  p.client->start(p.client_rec);

  blaster b{p.client, 100'000};
  boost::asio::post(io, [&] { b.pump(); });
  REQUIRE(run_until(
      io, [&] { return p.client_rec->closed.has_value(); }, std::chrono::seconds(60)));
  CHECK(*p.client_rec->closed == errc::rnr_retry_exceeded);
  CHECK(p.client->stats().rnr_errors >= 1);
  CHECK(held.size() == transport::connection_options{}.recv_ring_depth);
  REQUIRE(run_until(io, [&] { return p.server_rec->closed.has_value(); }));
  held.clear();
}

TEST_CASE("rdma listener serves 100 concurrent connections") {
  boost::asio::io_context io;
  transport::connection_options options;
  options.recv_ring_depth = 16;
  options.slot_size = 1024;
  options.send_buffers = 16;
  options.signal_every = 4;
  // 100 handshakes at once on one (emulated, perhaps sanitized) thread: none may time out.
  options.connect_timeout = options.handshake_timeout = std::chrono::seconds(60);
  constexpr int kClients = 100;
  constexpr int kMessages = 20;

  auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(7506), options);
  std::vector<std::shared_ptr<transport::connection>> servers;
  std::vector<std::shared_ptr<recorder>> server_recs;
  std::function<void()> accept_next = [&] {
    listener->async_accept(io.get_executor(),
                           [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             if (ec) return;
                             auto rec = std::make_shared<recorder>();
                             start_echo(c, rec);
                             servers.push_back(std::move(c));
                             server_recs.push_back(std::move(rec));
                             accept_next();
                           });
  };
  accept_next();

  std::vector<std::shared_ptr<transport::connection>> clients(kClients);
  std::vector<std::shared_ptr<recorder>> recs(kClients);
  int connected = 0, failed = 0;
  for (int i = 0; i < kClients; ++i) {
    transport::rdma::async_connect(
        io.get_executor(), rdma_endpoint(7506), options,
        [&, i](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
          if (ec) {
            ++failed;
            return;
          }
          ++connected;
          recs[static_cast<std::size_t>(i)] = std::make_shared<recorder>();
          c->start(recs[static_cast<std::size_t>(i)]);
          for (int m = 0; m < kMessages; ++m) {
            const std::array<int, 2> msg{i, m};
            (void)c->send_copy(boost::asio::buffer(msg));
          }
          clients[static_cast<std::size_t>(i)] = std::move(c);
        });
  }
  REQUIRE(run_until(
      io, [&] { return connected + failed == kClients; }, std::chrono::seconds(120)));
  REQUIRE(failed == 0);
  auto all_echoed = [&] {
    for (const auto& r : recs)
      if (!r || r->messages.size() != kMessages) return false;
    return true;
  };
  REQUIRE(run_until(io, all_echoed, std::chrono::seconds(120)));
  CHECK(servers.size() == kClients);
  for (int i = 0; i < kClients; ++i) {
    const auto& msgs = recs[static_cast<std::size_t>(i)]->messages;
    for (int m = 0; m < kMessages; ++m) {
      std::array<int, 2> v{};
      REQUIRE(msgs[static_cast<std::size_t>(m)].size() == sizeof v);
      std::memcpy(v.data(), msgs[static_cast<std::size_t>(m)].data(), sizeof v);
      CHECK(v[0] == i);
      CHECK(v[1] == m);
    }
    CHECK(clients[static_cast<std::size_t>(i)]->stats().rnr_errors == 0);
  }
  for (auto& c : clients) c->close();
  REQUIRE(run_until(io, [&] {
    for (const auto& r : server_recs)
      if (!r->closed) return false;
    return true;
  }));
  for (const auto& r : server_recs) CHECK(*r->closed == errc::closed_by_peer);
  listener->close();
}

// rdma_cm takes addresses only: transport::async_connect resolves a host name first, without
// blocking the executor ("rxe-vm" is 10.0.0.1 in the VM's /etc/hosts), and connects to it.
TEST_CASE("rdma connect by host name resolves it, then connects") {
  boost::asio::io_context io;
  constexpr std::uint16_t kPort = 7507;
  auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(kPort), {});
  std::shared_ptr<transport::connection> server;
  listener->async_accept(io.get_executor(),
                         [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                           if (!ec) server = std::move(c);
                         });
  std::optional<boost::system::error_code> result;
  std::shared_ptr<transport::connection> client;
  transport::async_connect(io.get_executor(), transport::endpoint{transport::scheme::rdma, "rxe-vm", kPort},
                           {}, [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             result = ec;
                             client = std::move(c);
                           });
  REQUIRE(run_until(io, [&] { return result.has_value() && server != nullptr; }));
  REQUIRE_FALSE(*result);
  CHECK(client->remote_address().rfind("rdma://10.0.0.1:", 0) == 0);
  // A name that does not resolve fails unreachable.
  result.reset();
  transport::async_connect(
      io.get_executor(), transport::endpoint{transport::scheme::rdma, "no-such-host.invalid", kPort}, {},
      [&](boost::system::error_code ec, std::shared_ptr<transport::connection>) { result = ec; });
  REQUIRE(run_until(io, [&] { return result.has_value(); }));
  CHECK(*result == errc::unreachable);
}

// Asio's rule, as for tcp: a pending accept keeps the io_context its handler runs on busy until
// the handler is on its way there (the listener's own executor is another one).
TEST_CASE(
    "rdma listener: a pending accept keeps the io_context its handler runs on from running out of work") {
  boost::asio::io_context io;
  boost::asio::io_context elsewhere;
  constexpr std::uint16_t kPort = 7516;
  auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(kPort), {});
  std::optional<boost::system::error_code> accepted;
  std::shared_ptr<transport::connection> server;
  listener->async_accept(io.get_executor(),
                         boost::asio::bind_executor(elsewhere, [&](boost::system::error_code ec,
                                                                   std::shared_ptr<transport::connection> c) {
                           accepted = ec;
                           server = std::move(c);
                         }));
  CHECK(elsewhere.poll() == 0);
  CHECK_FALSE(elsewhere.stopped());  // it waits for the accept's handler
  std::optional<boost::system::error_code> connected;
  std::shared_ptr<transport::connection> client;
  transport::rdma::async_connect(io.get_executor(), rdma_endpoint(kPort), {},
                                 [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                                   connected = ec;
                                   client = std::move(c);
                                 });
  REQUIRE(run_until(io, [&] {
    elsewhere.poll();
    return accepted.has_value() && connected.has_value();
  }));
  CHECK_FALSE(*accepted);
  CHECK_FALSE(*connected);
  CHECK(elsewhere.poll() == 0);
  CHECK(elsewhere.stopped());  // nothing of it keeps the other io_context busy any more

  // The same for an accept that ends when the listener closes.
  elsewhere.restart();
  accepted.reset();
  listener->async_accept(
      io.get_executor(),
      boost::asio::bind_executor(elsewhere, [&](boost::system::error_code ec,
                                                std::shared_ptr<transport::connection>) { accepted = ec; }));
  CHECK(elsewhere.poll() == 0);
  CHECK_FALSE(elsewhere.stopped());
  listener->close();
  REQUIRE(run_until(io, [&] {
    elsewhere.poll();
    return accepted.has_value();
  }));
  CHECK(*accepted == boost::asio::error::operation_aborted);
  CHECK(elsewhere.poll() == 0);
  CHECK(elsewhere.stopped());
  if (client) client->close();  // never started: they end at once
  if (server) server->close();
}
