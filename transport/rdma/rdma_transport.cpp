#include "transport/rdma/rdma_transport.hpp"

#include "transport/rdma/qp_resources.hpp"
#include "transport/rdma/rdma_connector.hpp"
#include "transport/rdma/rdma_listener.hpp"

namespace rdmarpc::transport::rdma {

void async_connect(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options,
                   boost::asio::any_completion_handler<connect_signature> handler) {
  check_options(options);  // at once, not after resolving the route (channel::create checked already)
  rdma_connector::start(std::move(ex), ep, options, std::move(handler));
}

void check_options(const connection_options& options) {
  qp_resources::check_options(options);
}

std::unique_ptr<listener> make_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                                        const connection_options& options) {
  check_options(options);  // before a cm_id is made: a bad setting fails listen(), not every accept
  return std::make_unique<rdma_listener>(std::move(ex), ep, options);
}

}  // namespace rdmarpc::transport::rdma
