// The generic transport::connection contract (tests/transport/connection_contract.hpp) over rdma:
// a listener on 10.0.0.1 port 0 and one connected pair per test. Label rdma (VM only).

#include "tests/transport/connection_contract.hpp"
#include "transport/rdma/rdma_transport.hpp"

using namespace rdmarpc;

namespace {

test::connected_pair make_rdma_pair(boost::asio::io_context& io,
                                    const transport::connection_options& options) {
  auto listener =
      transport::rdma::make_listener(io.get_executor(), {transport::scheme::rdma, "10.0.0.1", 0}, options);
  std::shared_ptr<transport::connection> server, client;
  boost::system::error_code server_ec, client_ec;
  bool accepted = false, connected = false;
  listener->async_accept(io.get_executor(),
                         [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                           server_ec = ec;
                           server = std::move(c);
                           accepted = true;
                         });
  transport::rdma::async_connect(io.get_executor(), listener->local_endpoint(), options,
                                 [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                                   client_ec = ec;
                                   client = std::move(c);
                                   connected = true;
                                 });
  REQUIRE(test::run_until(io, [&] { return accepted && connected; }));
  REQUIRE_FALSE(server_ec);
  REQUIRE_FALSE(client_ec);
  // The accepted connection outlives its listener (it has its own rdma_cm event channel).
  return {client, server};
}

}  // namespace

RDMARPC_CONNECTION_CONTRACT_TESTS("rdma", "[rdma]", make_rdma_pair)
