// rdma peers that break the protocol on purpose, made with raw rdma_cm and verbs:
//  * clients that send a connection request and never complete the handshake: the listener holds
//    at most max_pending_handshakes pending QPs, frees them after handshake_timeout, and an honest
//    client gets in again (a client connected before carries on throughout) (QPs counted device-wide with
//    `rdma resource show`: in the test VM this binary is rxe0's only user);
//  * a peer that starts a fragmented message and never finishes it: the connection ends as a
//    protocol error after reassembly_timeout, and an honest client of the same listener is served
//    meanwhile;
//  * connections beyond the registered-memory budget (connection_options::registered_memory).
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <vector>

#include "resource_counts.hpp"
#include "tests/transport/raw_tcp.hpp"
#include "tests/transport_rdma/rdma_test_support.hpp"
#include "transport/error.hpp"
#include "transport/rdma/qp_resources.hpp"
#include "transport/rdma/wire.hpp"

using namespace rdmarpc;
using namespace rdmarpc::rdma_test;

namespace {

long device_qps() {
  return soak::count_resources().rdma["qp"];
}

// A client that sends a well-formed connection request and stops before the last step: it has no
// QP of its own, so rdma_cm hands it the server's accept (CONNECT_RESPONSE) and waits for it to
// finish with rdma_accept(), which it never calls. The server has allocated its QP and rings.
class stalled_client {
 public:
  stalled_client(boost::asio::io_context& io, std::uint16_t port) {
    resolve_raw(io, port, ch_, id_);
    const auto hello =
        transport::rdma::wire::encode_handshake({transport::rdma::wire::kProtocolVersion, 16, 4096, 1 << 20});
    rdma_conn_param param{};
    param.private_data = hello.data();
    param.private_data_len = static_cast<std::uint8_t>(hello.size());
    param.retry_count = 7;
    // No QP: rdma_cm leaves the last step to us. A QP number of its own for each client, or the
    // server's CM rejects the second as a stale duplicate of the first.
    static std::uint32_t next_fake_qp_num = 0x1000;
    param.qp_num = next_fake_qp_num++;
    REQUIRE(rdma_connect(id_, &param) == 0);
    first_event = next_raw_event(io, ch_);
  }
  ~stalled_client() {
    rdma_destroy_id(id_);
    rdma_destroy_event_channel(ch_);
  }
  stalled_client(const stalled_client&) = delete;
  stalled_client& operator=(const stalled_client&) = delete;

  rdma_cm_event_type first_event{};  // CONNECT_RESPONSE when the server accepted, REJECTED if not

 private:
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
};

// An honest connect; its error (none when it got in, then the connection is closed unless
// `keep` takes it).
boost::system::error_code honest_connect(boost::asio::io_context& io, std::uint16_t port,
                                         const transport::connection_options& options = {},
                                         std::shared_ptr<transport::connection>* keep = nullptr) {
  std::optional<boost::system::error_code> result;
  std::shared_ptr<transport::connection> conn;
  transport::rdma::async_connect(io.get_executor(), rdma_endpoint(port), options,
                                 [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                                   result = ec;
                                   conn = std::move(c);
                                 });
  REQUIRE(run_until(io, [&] { return result.has_value(); }));
  if (keep != nullptr) {
    *keep = std::move(conn);
  } else if (conn) {
    conn->close();
  }
  return *result;
}

}  // namespace

TEST_CASE("rdma listener: stalled handshakes are bounded and dropped after handshake_timeout") {
  boost::asio::io_context io;
  constexpr std::uint16_t kPort = 7531;
  transport::connection_options server_options;
  server_options.max_pending_handshakes = 2;
  // Long enough for everything up to the wait below (two more clients, an honest connect, two
  // runs of the `rdma` tool) on a slow machine: a pending handshake dropped early would let c in.
  server_options.handshake_timeout = std::chrono::seconds(8);
  auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(kPort), server_options);
  std::vector<std::shared_ptr<transport::connection>> accepted;
  std::vector<std::shared_ptr<recorder>> server_ends;
  std::function<void()> accept_next = [&] {
    listener->async_accept(io.get_executor(),
                           [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             if (ec) return;
                             server_ends.push_back(std::make_shared<recorder>());
                             c->start(server_ends.back());
                             accepted.push_back(std::move(c));
                             accept_next();
                           });
  };
  accept_next();
  // A client connected before the attack: it must carry on through it.
  std::shared_ptr<transport::connection> keeper;
  REQUIRE_FALSE(honest_connect(io, kPort, {}, &keeper));
  auto keeper_end = std::make_shared<recorder>();
  keeper->start(keeper_end);
  REQUIRE(run_until(io, [&] { return accepted.size() == 1; }));
  const long idle_qps = device_qps();

  // Two stalled clients fill the pending handshakes: the server allocated a QP for each.
  auto a = std::make_unique<stalled_client>(io, kPort);
  auto b = std::make_unique<stalled_client>(io, kPort);
  CHECK(a->first_event == RDMA_CM_EVENT_CONNECT_RESPONSE);
  CHECK(b->first_event == RDMA_CM_EVENT_CONNECT_RESPONSE);
  CHECK(device_qps() == idle_qps + 2);

  // A third request, stalled or honest, is rejected before anything is allocated for it.
  stalled_client c(io, kPort);
  CHECK(c.first_event == RDMA_CM_EVENT_REJECTED);
  CHECK(honest_connect(io, kPort) == transport::errc::handshake_rejected);
  CHECK(device_qps() == idle_qps + 2);
  CHECK(accepted.size() == 1);
  // The established connection carries on meanwhile, both ways.
  const std::vector<std::byte> note{std::byte{1}, std::byte{2}, std::byte{3}};
  REQUIRE_FALSE(keeper->send_copy(boost::asio::buffer(note)));
  REQUIRE(run_until(io, [&] { return server_ends[0]->messages.size() == 1; }));
  REQUIRE_FALSE(accepted[0]->send_copy(boost::asio::buffer(note)));
  REQUIRE(run_until(io, [&] { return keeper_end->messages.size() == 1; }));
  CHECK(server_ends[0]->messages[0] == note);

  // After handshake_timeout the server frees both pending QPs (the stalled clients are still
  // there: nothing of theirs helped), and an honest client gets in.
  REQUIRE(run_until(
      io, [&] { return device_qps() == idle_qps; }, std::chrono::seconds(60)));
  CHECK_FALSE(honest_connect(io, kPort));
  REQUIRE(run_until(io, [&] { return accepted.size() == 2; }));
  CHECK(accepted.size() == 2);
  CHECK_FALSE(server_ends[0]->closed.has_value());
  CHECK_FALSE(keeper_end->closed.has_value());
}

namespace {

// A raw rdma_cm + verbs client with a real QP that speaks the handshake and then sends whatever
// immediates and bytes it is told to (nothing else: no credits returned, no fragmentation rules).
class raw_peer {
 public:
  raw_peer(boost::asio::io_context& io, std::uint16_t port, std::uint32_t slot_size) : buffer_(slot_size) {
    resolve_raw(io, port, ch_, id_);
    pd_ = ibv_alloc_pd(id_->verbs);
    REQUIRE(pd_ != nullptr);
    cq_ = ibv_create_cq(id_->verbs, 32, nullptr, nullptr, 0);
    REQUIRE(cq_ != nullptr);
    ibv_qp_init_attr attr{};
    attr.send_cq = attr.recv_cq = cq_;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 16;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    REQUIRE(rdma_create_qp(id_, pd_, &attr) == 0);
    mr_ = ibv_reg_mr(pd_, buffer_.data(), buffer_.size(), IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr_ != nullptr);
    // Receives for whatever the server sends (credit returns), so it never meets an empty queue.
    receive_area_.resize(16 * std::size_t{slot_size});
    recv_mr_ = ibv_reg_mr(pd_, receive_area_.data(), receive_area_.size(), IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(recv_mr_ != nullptr);
    for (std::uint32_t i = 0; i < 16; ++i) {
      ibv_sge sge{reinterpret_cast<std::uintptr_t>(receive_area_.data()) + i * slot_size, slot_size,
                  recv_mr_->lkey};
      ibv_recv_wr wr{};
      wr.wr_id = i;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      REQUIRE(ibv_post_recv(id_->qp, &wr, &bad) == 0);
    }
    const auto hello = transport::rdma::wire::encode_handshake(
        {transport::rdma::wire::kProtocolVersion, 16, slot_size, 1 << 20});
    rdma_conn_param param{};
    param.private_data = hello.data();
    param.private_data_len = static_cast<std::uint8_t>(hello.size());
    param.retry_count = 7;
    param.rnr_retry_count = 0;
    REQUIRE(rdma_connect(id_, &param) == 0);
    REQUIRE(next_raw_event(io, ch_) == RDMA_CM_EVENT_ESTABLISHED);
  }
  ~raw_peer() {
    rdma_disconnect(id_);
    rdma_destroy_qp(id_);
    ibv_dereg_mr(recv_mr_);
    ibv_dereg_mr(mr_);
    ibv_destroy_cq(cq_);
    ibv_dealloc_pd(pd_);
    rdma_destroy_id(id_);
    rdma_destroy_event_channel(ch_);
  }
  raw_peer(const raw_peer&) = delete;
  raw_peer& operator=(const raw_peer&) = delete;

  // One SEND_WITH_IMM of `size` bytes of the buffer with immediate `fields`.
  void send(const transport::rdma::wire::imm_fields& fields, std::size_t size) {
    std::memset(buffer_.data(), 0x5a, size);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer_.data()), static_cast<std::uint32_t>(size),
                mr_->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(transport::rdma::wire::encode_imm(fields));
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(id_->qp, &wr, &bad) == 0);
  }

 private:
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_mr* recv_mr_ = nullptr;
  std::vector<std::byte> buffer_;
  std::vector<std::byte> receive_area_;
};

// A listener with `options`, a raw_peer connected to it, and the server's end started with a
// recorder.
struct raw_peer_session {
  raw_peer_session(boost::asio::io_context& io, std::uint16_t port, std::uint32_t slot,
                   const transport::connection_options& options)
      : listener(transport::rdma::make_listener(io.get_executor(), rdma_endpoint(port), options)) {
    listener->async_accept(io.get_executor(),
                           [this](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             if (!ec) server = std::move(c);
                           });
    peer = std::make_unique<raw_peer>(io, port, slot);
    REQUIRE(run_until(io, [&] { return server != nullptr; }));
    server->start(server_end);
  }
  std::unique_ptr<transport::listener> listener;
  std::shared_ptr<transport::connection> server;
  std::unique_ptr<raw_peer> peer;
  std::shared_ptr<recorder> server_end = std::make_shared<recorder>();
};

}  // namespace

TEST_CASE("rdma: a fragmented message left unfinished ends the connection after reassembly_timeout") {
  boost::asio::io_context io;
  constexpr std::uint16_t kPort = 7532;
  constexpr std::uint32_t kSlot = 4096;
  transport::connection_options server_options;
  server_options.reassembly_timeout = std::chrono::milliseconds(500);
  raw_peer_session session(io, kPort, kSlot, server_options);
  raw_peer& peer = *session.peer;
  auto& rec = session.server_end;

  // An honest client of the same listener.
  std::shared_ptr<transport::connection> honest_server_end;
  session.listener->async_accept(io.get_executor(),
                                 [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                                   if (!ec) honest_server_end = std::move(c);
                                 });
  std::shared_ptr<transport::connection> honest;
  REQUIRE_FALSE(honest_connect(io, kPort, {}, &honest));
  honest->start(std::make_shared<recorder>());
  REQUIRE(run_until(io, [&] { return honest_server_end != nullptr; }));
  auto honest_rec = std::make_shared<recorder>();
  honest_server_end->start(honest_rec);

  // A first fragment (a whole slot, as the rules want) and then nothing, ever.
  peer.send({0, transport::rdma::wire::fragment::first}, kSlot);
  // The honest client is served (the hostile connection is not looked at here: whether its
  // timeout has run out by then depends on the VM's speed).
  const std::vector<std::byte> note{std::byte{7}, std::byte{8}};
  REQUIRE_FALSE(honest->send_copy(boost::asio::buffer(note)));
  REQUIRE(run_until(io, [&] { return honest_rec->messages.size() == 1; }));
  REQUIRE(run_until(
      io, [&] { return rec->closed.has_value(); }, std::chrono::seconds(20)));
  CHECK(*rec->closed == transport::errc::protocol_error);
  CHECK(rec->messages.empty());
  // And after the hostile connection ended.
  REQUIRE_FALSE(honest->send_copy(boost::asio::buffer(note)));
  REQUIRE(run_until(io, [&] { return honest_rec->messages.size() == 2; }));
  CHECK_FALSE(honest_rec->closed.has_value());
}

// What a partial message costs while it waits: the fragments received so far (up to
// max_message_size), for at most reassembly_timeout; then they are freed with the connection.
TEST_CASE("rdma: a partial message holds its fragments' bytes until reassembly_timeout, then nothing") {
  boost::asio::io_context io;
  constexpr std::uint16_t kPort = 7535;
  constexpr std::uint32_t kSlot = 4096;
  constexpr std::size_t kFragments = 64;  // fewer than the server's ring: no credits needed
  transport::connection_options server_options;
  server_options.reassembly_timeout = std::chrono::milliseconds(3000);
  raw_peer_session session(io, kPort, kSlot, server_options);
  raw_peer& peer = *session.peer;
  auto& rec = session.server_end;
  const std::size_t before = test::heap_bytes_in_use();
  peer.send({0, transport::rdma::wire::fragment::first}, kSlot);
  for (std::size_t i = 1; i < kFragments; ++i) peer.send({0, transport::rdma::wire::fragment::middle}, kSlot);
  constexpr std::size_t kHeld = kFragments * kSlot;  // 256 KiB
  const auto grown = [&] { return test::heap_bytes_in_use() - std::min(before, test::heap_bytes_in_use()); };
  // Held while it waits: the bytes so far, in a buffer grown by doubling (and slack).
  REQUIRE(run_until(io, [&] { return grown() >= kHeld || rec->closed.has_value(); }));
  CAPTURE(grown());
  CHECK(grown() <= 2 * kHeld + (1u << 20));
  REQUIRE(run_until(
      io, [&] { return rec->closed.has_value(); }, std::chrono::seconds(30)));
  CHECK(*rec->closed == transport::errc::protocol_error);
  CHECK(rec->messages.empty());
  // Freed with the connection (once its teardown handlers have run).
  session.server.reset();
  CHECK(run_until(io, [&] { return grown() < kHeld / 2; }));
}

TEST_CASE("rdma: an empty middle fragment is a protocol error at once") {
  boost::asio::io_context io;
  constexpr std::uint16_t kPort = 7533;
  constexpr std::uint32_t kSlot = 4096;
  transport::connection_options server_options;
  server_options.reassembly_timeout = std::chrono::minutes(10);  // not what ends it here
  raw_peer_session session(io, kPort, kSlot, server_options);
  raw_peer& peer = *session.peer;
  auto& rec = session.server_end;

  peer.send({0, transport::rdma::wire::fragment::first}, kSlot);
  peer.send({0, transport::rdma::wire::fragment::middle}, 0);
  REQUIRE(run_until(
      io, [&] { return rec->closed.has_value(); }, std::chrono::seconds(20)));
  CHECK(*rec->closed == transport::errc::protocol_error);
  CHECK(rec->messages.empty());
}

TEST_CASE("rdma listener: a connection beyond the registered-memory budget is rejected before allocation") {
  boost::asio::io_context io;
  constexpr std::uint16_t kPort = 7534;
  // Rings of 16 + 16 slots of 1 KiB and 16 receive heads of 256 B: 36 KiB a connection.
  transport::connection_options small;
  small.recv_ring_depth = 16;
  small.send_buffers = 16;
  small.slot_size = 1024;
  auto budget = transport::memory_budget::create(40 * 1024);  // one connection's rings, not two
  transport::connection_options server_options = small;
  server_options.registered_memory = budget;
  auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(kPort), server_options);
  std::vector<std::shared_ptr<transport::connection>> accepted;
  std::vector<std::shared_ptr<recorder>> server_ends;
  std::function<void()> accept_next = [&] {
    listener->async_accept(io.get_executor(),
                           [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             if (ec) return;
                             server_ends.push_back(std::make_shared<recorder>());
                             c->start(server_ends.back());
                             accepted.push_back(std::move(c));
                             accept_next();
                           });
  };
  accept_next();
  const long idle_qps = device_qps();

  std::shared_ptr<transport::connection> first;
  REQUIRE_FALSE(honest_connect(io, kPort, small, &first));
  first->start(std::make_shared<recorder>());
  REQUIRE(run_until(io, [&] { return accepted.size() == 1; }));
  CHECK(budget->in_use() == 36 * 1024);
  CHECK(device_qps() == idle_qps + 2);  // the client's and the server's

  // The second does not fit: rejected, and the server allocated nothing for it. The reject says
  // why: the client's connect fails registered_memory_exhausted, not a bare handshake_rejected.
  CHECK(honest_connect(io, kPort, small) == transport::errc::registered_memory_exhausted);
  CHECK(budget->in_use() == 36 * 1024);
  CHECK(device_qps() == idle_qps + 2);
  CHECK(accepted.size() == 1);

  // Once the first is gone (its server end too: its rings stay registered while the connection
  // object lives, for messages read in place) the budget is whole again, and the next client gets
  // in.
  first->close();
  REQUIRE(run_until(io, [&] { return server_ends[0]->closed.has_value(); }));
  accepted.clear();
  REQUIRE(run_until(
      io, [&] { return budget->in_use() == 0; }, std::chrono::seconds(20)));
  CHECK_FALSE(honest_connect(io, kPort, small));
  REQUIRE(run_until(io, [&] { return accepted.size() == 1; }));
}

TEST_CASE("rdma connect beyond the client's own registered-memory budget fails before allocation") {
  boost::asio::io_context io;
  constexpr std::uint16_t kPort = 7535;
  auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(kPort), {});
  transport::connection_options client_options;
  // Room for exactly one connection's rings, one byte of which is taken (rings larger than the
  // whole limit are refused before connecting: rpc's server_limits test).
  client_options.registered_memory =
      transport::memory_budget::create(transport::rdma::qp_resources::registered_bytes(client_options));
  const auto taken = client_options.registered_memory->try_acquire(1);
  REQUIRE(taken);
  CHECK(honest_connect(io, kPort, client_options) == transport::errc::registered_memory_exhausted);
  CHECK(client_options.registered_memory->in_use() == 1);
}
