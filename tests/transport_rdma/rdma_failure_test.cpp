// The rdma transport's failure paths across processes and raw rdma_cm peers: a peer killed with
// SIGKILL mid-stream, malformed handshakes refused while the listener keeps accepting. Label rdma
// (VM only).

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "tests/transport_rdma/child_process.hpp"
#include "tests/transport_rdma/rdma_test_support.hpp"
#include "transport/rdma/wire.hpp"

using namespace rdmarpc;
using namespace rdmarpc::rdma_test;
using transport::errc;

TEST_CASE("rdma peer killed with SIGKILL mid-stream ends the survivor's connection within 2 s") {
  constexpr std::uint16_t kPort = 7510;
  // The child connects and streams messages until it is killed.
  child_process child = child_process::spawn([](int from_parent, int) {
    char go = 0;
    if (!read_byte(from_parent, go, 30000)) return 2;
    boost::asio::io_context io;
    std::shared_ptr<transport::connection> conn;
    boost::system::error_code cec;
    bool done = false;
    transport::rdma::async_connect(
        io.get_executor(), rdma_endpoint(kPort), {},
        [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
          cec = ec;
          conn = std::move(c);
          done = true;
        });
    run_until(io, [&] { return done; });
    if (cec || !conn) return 3;
    auto rec = std::make_shared<recorder>();
    conn->start(rec);
    std::uint64_t seq = 0;
    std::function<void()> pump = [&] {
      for (;;) {
        const auto ec = conn->send_copy(boost::asio::buffer(&seq, sizeof seq));
        if (ec == boost::asio::error::would_block) {
          conn->async_reserve(sizeof seq, [&](boost::system::error_code wec, transport::send_reservation r) {
            if (wec) return;
            std::memcpy(r.data().data(), &seq, sizeof seq);
            r.commit();
            ++seq;
            pump();
          });
          return;
        }
        if (ec) return;
        ++seq;
      }
    };
    boost::asio::post(io, pump);
    run_until(
        io, [&] { return rec->closed.has_value(); }, std::chrono::seconds(60));
    return 0;
  });

  boost::asio::io_context io;
  auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(kPort), {});
  std::shared_ptr<transport::connection> server;
  listener->async_accept(io.get_executor(),
                         [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                           if (!ec) server = std::move(c);
                         });
  REQUIRE(::write(child.to_child, "g", 1) == 1);
  REQUIRE(run_until(io, [&] { return server != nullptr; }));
  auto rec = std::make_shared<recorder>();
  std::uint64_t received = 0;
  rec->on_each = [&](transport::received_message&) { ++received; };
  server->start(rec);
  REQUIRE(run_until(io, [&] { return received >= 2000; }));

  const auto killed_at = std::chrono::steady_clock::now();
  REQUIRE(::kill(child.pid, SIGKILL) == 0);
  const bool ended = run_until(
      io, [&] { return rec->closed.has_value(); }, std::chrono::seconds(10));
  REQUIRE(ended);
  const auto elapsed = rec->closed_at - killed_at;
  INFO("connection ended " << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                           << " ms after SIGKILL with: " << rec->closed->message());
  CHECK(*rec->closed);
  // A dead peer said no goodbye: not to be mistaken for a graceful close (closed_by_peer).
  CHECK(*rec->closed == errc::connection_lost);
  // How soon is printed below, not asserted: timing belongs in bench/ (a sanitized child's teardown
  // under TCG alone can take seconds). The 10 s bound above is the assertion.
  CHECK(server->send_copy(boost::asio::buffer(&received, sizeof received)) == errc::not_connected);
  std::printf("kill: survivor saw '%s' %lld ms after SIGKILL (after %llu messages)\n",
              rec->closed->message().c_str(),
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()),
              static_cast<unsigned long long>(received));
}

namespace {

// A raw rdma_cm client that sends `private_data` as its handshake; returns the final event.
rdma_cm_event_type raw_connect(boost::asio::io_context& io, std::uint16_t port,
                               std::span<const std::byte> private_data) {
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  resolve_raw(io, port, ch, id);
  ibv_pd* pd = ibv_alloc_pd(id->verbs);
  REQUIRE(pd != nullptr);
  ibv_cq* cq = ibv_create_cq(id->verbs, 8, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_qp_init_attr attr{};
  attr.send_cq = cq;
  attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  REQUIRE(rdma_create_qp(id, pd, &attr) == 0);
  rdma_conn_param param{};
  param.private_data = private_data.empty() ? nullptr : private_data.data();
  param.private_data_len = static_cast<std::uint8_t>(private_data.size());
  param.retry_count = 7;
  REQUIRE(rdma_connect(id, &param) == 0);
  const auto result = next_raw_event(io, ch);
  rdma_destroy_qp(id);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return result;
}

}  // namespace

TEST_CASE("rdma listener refuses malformed handshakes and keeps accepting") {
  boost::asio::io_context io;
  constexpr std::uint16_t kPort = 7511;
  auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(kPort), {});
  std::shared_ptr<transport::connection> server;
  listener->async_accept(io.get_executor(),
                         [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                           if (!ec) server = std::move(c);
                         });

  std::vector<std::byte> garbage(40, std::byte{0x5a});
  CHECK(raw_connect(io, kPort, garbage) == RDMA_CM_EVENT_REJECTED);
  std::vector<std::byte> short_data(5, std::byte{0x01});
  CHECK(raw_connect(io, kPort, short_data) == RDMA_CM_EVENT_REJECTED);
  CHECK(raw_connect(io, kPort, {}) == RDMA_CM_EVENT_REJECTED);
  // Right magic and version but a ring depth of 0.
  auto bad =
      transport::rdma::wire::encode_handshake({transport::rdma::wire::kProtocolVersion, 0, 4096, 1024});
  CHECK(raw_connect(io, kPort, bad) == RDMA_CM_EVENT_REJECTED);
  CHECK(server == nullptr);

  // A well-formed client still gets in and can talk.
  std::shared_ptr<transport::connection> client;
  transport::rdma::async_connect(io.get_executor(), rdma_endpoint(kPort), {},
                                 [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                                   REQUIRE_FALSE(ec);
                                   client = std::move(c);
                                 });
  REQUIRE(run_until(io, [&] { return client && server; }));
  auto crec = std::make_shared<recorder>();
  auto srec = std::make_shared<recorder>();
  client->start(crec);
  server->start(srec);
  const auto msg = pattern(100, 3);
  REQUIRE_FALSE(client->send_copy(boost::asio::buffer(msg)));
  REQUIRE(run_until(io, [&] { return srec->messages.size() == 1; }));
  CHECK(srec->messages[0] == msg);
  client->close();
  REQUIRE(run_until(io, [&] { return crec->closed && srec->closed; }));
}

TEST_CASE("rdma connect to a port nobody listens on fails cleanly") {
  boost::asio::io_context io;
  boost::system::error_code result;
  bool done = false;
  transport::rdma::async_connect(io.get_executor(), rdma_endpoint(7512), {},
                                 [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                                   result = ec;
                                   CHECK(c == nullptr);
                                   done = true;
                                 });
  REQUIRE(run_until(
      io, [&] { return done; }, std::chrono::seconds(20)));
  CHECK(
      (result == errc::unreachable || result == errc::handshake_rejected || result == errc::connect_timeout));
}
