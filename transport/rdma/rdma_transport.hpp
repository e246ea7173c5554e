#pragma once
// Entry points of the rdma transport, called by transport/connect.cpp when a URI's scheme is "rdma".
// Layer: transport. Threading: see transport/connection.hpp.
// Fork: registered memory is not shared with children. A program that forks after opening rdma
// connections must call ibv_fork_init() before any verbs use (or rely on rdma-core's automatic fork
// support on kernels that have it); children must not touch the parent's connections, and cannot
// open new ones either once the parent used rdma_cm: librdmacm caches the parent's verbs contexts
// per process, and the kernel refuses a child's use of them (ibv_post_send fails with EACCES).
// A child that needs RDMA should exec a fresh program (as tests/rpc's killed-server case does).

#include "transport/listener.hpp"

namespace rdmarpc::transport::rdma {

void async_connect(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options,
                   boost::asio::any_completion_handler<connect_signature> handler);

// Throws std::invalid_argument when `options` cannot make an rdma connection (its rings' limits:
// qp_resources::check_options). async_connect and make_listener check first.
void check_options(const connection_options& options);

std::unique_ptr<listener> make_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                                        const connection_options& options);

}  // namespace rdmarpc::transport::rdma
