#include "transport/rdma/rdma_transport.hpp"

#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

namespace rdmarpc::transport::rdma {

// Temporary entry points so transport/connect.cpp links while the rdma connection is being built.
void async_connect(boost::asio::any_io_executor ex, const endpoint&, const connection_options&,
                   boost::asio::any_completion_handler<connect_signature> handler) {
  boost::asio::post(ex, [handler = std::move(handler)]() mutable {
    std::move(handler)(make_error_code(errc::unsupported_scheme), nullptr);
  });
}

std::unique_ptr<listener> make_listener(boost::asio::any_io_executor, const endpoint&, const connection_options&) {
  throw boost::system::system_error(make_error_code(errc::unsupported_scheme), "rdma listener");
}

}  // namespace rdmarpc::transport::rdma
