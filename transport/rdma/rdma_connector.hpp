#pragma once
// rdma_connector: client-side rdma_cm setup of one connection: resolve address and route, create
// PD/CQ/QP, post the whole receive ring, rdma_connect with our handshake, validate the server's.
// Layer: transport (rdma). Threading: runs on the executor the connection will belong to.

#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>

#include "transport/listener.hpp"
#include "transport/rdma/cm_event_pump.hpp"
#include "transport/rdma/qp_resources.hpp"

namespace rdmarpc::transport::rdma {

class rdma_connector final : public std::enable_shared_from_this<rdma_connector>,
                             public cm_event_pump::handler {
 public:
  // Starts connecting; `handler` gets void(error_code, shared_ptr<connection>) on its associated
  // executor (default `ex`), never inline. Errors: unreachable, connect_timeout, handshake_rejected.
  static void start(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options,
                    boost::asio::any_completion_handler<connect_signature> handler);

  rdma_connector(boost::asio::any_io_executor ex, const connection_options& options,
                 boost::asio::any_completion_handler<connect_signature> handler);

 private:
  void begin(const endpoint& ep);
  void on_cm_event(verbs::cm_event event) override;
  bool on_cm_error(const boost::system::error_code& ec) override;
  void on_event(rdma_cm_event& event);
  void on_route_resolved();
  void finish(boost::system::error_code ec, std::shared_ptr<connection> conn = nullptr);

  boost::asio::any_io_executor ex_;
  connection_options options_;
  boost::asio::any_completion_handler<connect_signature> handler_;
  boost::asio::steady_timer timer_;
  // Before route resolution the connector owns channel and id; afterwards resources_ does.
  verbs::event_channel channel_;
  verbs::cm_id id_;
  std::unique_ptr<qp_resources> resources_;
  std::optional<cm_event_pump> events_;  // on channel_'s fd; stopped once the connection takes over
  bool done_ = false;
};

}  // namespace rdmarpc::transport::rdma
