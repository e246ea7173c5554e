// The rdma listener's handshake limits (connection_options::max_pending_handshakes and
// handshake_timeout) against clients that send a connection request and never complete the
// handshake: the server holds at most that many pending QPs, frees them after the timeout, and an
// honest client gets in again. QPs are counted device-wide (`rdma resource show`): in the test VM
// this binary is rxe0's only user.
#include <arpa/inet.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "resource_counts.hpp"
#include "tests/transport_rdma/rdma_test_support.hpp"
#include "transport/error.hpp"
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
    ch_ = rdma_create_event_channel();
    REQUIRE(ch_ != nullptr);
    REQUIRE(::fcntl(ch_->fd, F_SETFL, ::fcntl(ch_->fd, F_GETFL) | O_NONBLOCK) == 0);
    REQUIRE(rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    REQUIRE(::inet_pton(AF_INET, kRdmaHost, &addr.sin_addr) == 1);
    REQUIRE(rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&addr), 2000) == 0);
    REQUIRE(next_raw_event(io, ch_) == RDMA_CM_EVENT_ADDR_RESOLVED);
    REQUIRE(rdma_resolve_route(id_, 2000) == 0);
    REQUIRE(next_raw_event(io, ch_) == RDMA_CM_EVENT_ROUTE_RESOLVED);
    const auto hello = transport::rdma::wire::encode_handshake({transport::rdma::wire::kProtocolVersion, 16, 4096, 1 << 20});
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

// An honest connect; its error (none when it got in, then the connection is closed).
boost::system::error_code honest_connect(boost::asio::io_context& io, std::uint16_t port) {
  std::optional<boost::system::error_code> result;
  std::shared_ptr<transport::connection> conn;
  transport::rdma::async_connect(io.get_executor(), rdma_endpoint(port), {},
                                 [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                                   result = ec;
                                   conn = std::move(c);
                                 });
  REQUIRE(run_until(io, [&] { return result.has_value(); }));
  if (conn) conn->close();
  return *result;
}

}  // namespace

TEST_CASE("rdma listener: stalled handshakes are bounded and dropped after handshake_timeout") {
  boost::asio::io_context io;
  constexpr std::uint16_t kPort = 7531;
  transport::connection_options server_options;
  server_options.max_pending_handshakes = 2;
  server_options.handshake_timeout = std::chrono::milliseconds(1500);
  auto listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(kPort), server_options);
  std::vector<std::shared_ptr<transport::connection>> accepted;
  std::function<void()> accept_next = [&] {
    listener->async_accept(io.get_executor(),
                           [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             if (ec) return;
                             c->close();
                             accepted.push_back(std::move(c));
                             accept_next();
                           });
  };
  accept_next();
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
  CHECK(accepted.empty());

  // After handshake_timeout the server frees both pending QPs (the stalled clients are still
  // there: nothing of theirs helped), and an honest client gets in.
  REQUIRE(run_until(io, [&] { return device_qps() == idle_qps; }, std::chrono::seconds(20)));
  CHECK_FALSE(honest_connect(io, kPort));
  REQUIRE(run_until(io, [&] { return accepted.size() == 1; }));
  CHECK(accepted.size() == 1);
}
