#pragma once
// Asynchronous name resolution for endpoints: a host name becomes one endpoint per address it
// resolves to (numeric hosts resolve to themselves without a lookup). Both schemes address hosts
// by IP, so one resolver serves rdma and tcp. Layer: transport. Threading: the completion runs on
// the handler's associated executor (default `ex`); the lookup itself runs on Asio's resolver
// thread, never on the caller's event loop.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <vector>

#include "transport/endpoint.hpp"

namespace rdmarpc::transport {

using resolve_signature = void(boost::system::error_code, std::vector<endpoint>);

void async_resolve_impl(boost::asio::any_io_executor ex, endpoint ep,
                        boost::asio::any_completion_handler<resolve_signature> handler);

// Resolves `ep.host`. Completion: void(error_code, vector<endpoint>): the addresses in the
// resolver's order (duplicates removed), each with ep's scheme and port and a numeric host; or
// errc::unreachable when the name does not resolve.
template <typename CompletionToken>
auto async_resolve(boost::asio::any_io_executor ex, const endpoint& ep, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, resolve_signature>(
      [](auto handler, boost::asio::any_io_executor ex, endpoint ep) {
        async_resolve_impl(std::move(ex), std::move(ep),
                           boost::asio::any_completion_handler<resolve_signature>(std::move(handler)));
      },
      token, std::move(ex), ep);
}

}  // namespace rdmarpc::transport
