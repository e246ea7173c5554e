#pragma once
// Entry points of the tcp transport, called by transport/connect.cpp when a URI's scheme is "tcp".
// Layer: transport. Threading: see transport/connection.hpp.

#include "transport/listener.hpp"

namespace rdmarpc::transport::tcp {

void async_connect(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options,
                   boost::asio::any_completion_handler<connect_signature> handler);

std::unique_ptr<listener> make_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                                        const connection_options& options);

}  // namespace rdmarpc::transport::tcp
