#pragma once
// Opening connections from URIs: async_connect on the client side, make_listener on the server
// side. The one place that knows every transport: it dispatches on the endpoint's scheme to the
// rdma or tcp implementation (connect.cpp). Layer: transport.
// Threading: a listener belongs to one executor, like a connection.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <memory>

#include "transport/connection.hpp"
#include "transport/endpoint.hpp"
#include "transport/listener.hpp"

namespace rdmarpc::transport {

// Non-template entry point (connect.cpp dispatches on ep.scheme).
void async_connect_impl(boost::asio::any_io_executor ex, endpoint ep, connection_options options,
                        boost::asio::any_completion_handler<connect_signature> handler);

// Connects to `ep`; the new connection belongs to `ex`. Completion: void(error_code,
// shared_ptr<connection>) on the handler's associated executor (default `ex`). Errors:
// errc::unreachable, errc::connect_timeout, errc::handshake_rejected, errc::unsupported_scheme,
// and over rdma errc::registered_memory_exhausted, errc::device_error, errc::address_changed.
// Throws std::invalid_argument at once for options the transport cannot use (check_options).
template <typename CompletionToken>
auto async_connect(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options,
                   CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, connect_signature>(
      [](auto handler, boost::asio::any_io_executor ex, endpoint ep, connection_options options) {
        async_connect_impl(std::move(ex), std::move(ep), std::move(options),
                           boost::asio::any_completion_handler<connect_signature>(std::move(handler)));
      },
      token, std::move(ex), ep, options);
}

// Throws std::invalid_argument, naming the option, its value and its range, when `options`
// cannot make a connection over `ep`'s transport (rdma: the rings' limits, README "Limits"); the
// other transports ignore what does not apply to them. rdmarpc::channel::create checks each of its
// endpoints, so a bad setting fails there rather than every connection attempt.
void check_options(const endpoint& ep, const connection_options& options);

// Binds and listens on `ep` (scheme rdma or tcp). Throws boost::system::system_error on failure,
// std::invalid_argument for options its transport cannot use (check_options).
std::unique_ptr<listener> make_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                                        const connection_options& options);

// A monitor of the RDMA devices' async events, read on `ex` (connection_options::device_events;
// transport/rdma/device_event_monitor.hpp). One per process.
std::shared_ptr<rdma::device_event_monitor> make_device_event_monitor(boost::asio::any_io_executor ex);

}  // namespace rdmarpc::transport
