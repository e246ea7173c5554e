// Scheme dispatch for async_connect / make_listener (declared in transport/connect.hpp).
#include "transport/connect.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include "transport/rdma/device_event_monitor.hpp"
#include "transport/rdma/rdma_transport.hpp"
#include "transport/resolve.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace rdmarpc::transport {
namespace {

// rdma_cm takes addresses only, and a blocking getaddrinfo would stall the executor: a name is
// resolved first (transport/resolve.hpp), then the first address is connected to.
void async_connect_rdma(boost::asio::any_io_executor ex, const endpoint& ep, connection_options options,
                        boost::asio::any_completion_handler<connect_signature> handler) {
  if (is_numeric_host(ep.host)) return rdma::async_connect(std::move(ex), ep, options, std::move(handler));
  async_resolve(ex, ep,
                [ex, options = std::move(options), handler = std::move(handler)](
                    boost::system::error_code ec, std::vector<endpoint> found) mutable {
                  if (ec || found.empty()) {
                    std::move(handler)(ec ? ec : make_error_code(errc::unreachable),
                                       std::shared_ptr<connection>());
                    return;
                  }
                  rdma::async_connect(std::move(ex), found.front(), options, std::move(handler));
                });
}

}  // namespace

void async_connect_impl(boost::asio::any_io_executor ex, endpoint ep, connection_options options,
                        boost::asio::any_completion_handler<connect_signature> handler) {
  switch (ep.scheme) {
    case scheme::rdma: async_connect_rdma(std::move(ex), ep, std::move(options), std::move(handler)); return;
    case scheme::tcp: tcp::async_connect(std::move(ex), ep, options, std::move(handler)); return;
  }
  // Only an out-of-range enum value gets here (parse_endpoint never produces one).
  boost::asio::post(ex, boost::asio::append(std::move(handler), make_error_code(errc::unsupported_scheme),
                                            std::shared_ptr<connection>()));
}

void check_options(const endpoint& ep, const connection_options& options) {
  if (ep.scheme == scheme::rdma) rdma::check_options(options);
}

std::unique_ptr<listener> make_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                                        const connection_options& options) {
  switch (ep.scheme) {
    case scheme::rdma: return rdma::make_listener(std::move(ex), ep, options);
    case scheme::tcp: return tcp::make_listener(std::move(ex), ep, options);
  }
  throw boost::system::system_error(make_error_code(errc::unsupported_scheme), "make_listener");
}

std::shared_ptr<rdma::device_event_monitor> make_device_event_monitor(boost::asio::any_io_executor ex) {
  return rdma::device_event_monitor::create(std::move(ex));
}

}  // namespace rdmarpc::transport
