#include "transport/resolve.hpp"

#include <algorithm>
#include <boost/asio/append.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <memory>

#include "log/log.hpp"
#include "transport/error.hpp"

namespace rdmarpc::transport {

void async_resolve_impl(boost::asio::any_io_executor ex, endpoint ep,
                        boost::asio::any_completion_handler<resolve_signature> handler) {
  if (is_numeric_host(ep.host)) {
    std::vector<endpoint> one{std::move(ep)};
    boost::asio::post(ex,
                      boost::asio::append(std::move(handler), boost::system::error_code{}, std::move(one)));
    return;
  }
  auto resolver = std::make_shared<boost::asio::ip::tcp::resolver>(ex);
  const std::string host = ep.host, port = std::to_string(ep.port);
  resolver->async_resolve(
      host, port, boost::asio::ip::tcp::resolver::numeric_service,
      [resolver, ep = std::move(ep), handler = std::move(handler)](
          const boost::system::error_code& ec, boost::asio::ip::tcp::resolver::results_type results) mutable {
        std::vector<endpoint> found;
        for (const auto& entry : results) {
          endpoint e{ep.scheme, entry.endpoint().address().to_string(), ep.port};
          if (std::find(found.begin(), found.end(), e) == found.end()) found.push_back(std::move(e));
        }
        boost::system::error_code result;
        if (ec || found.empty()) {
          rdmarpc::logger()->debug("rdmarpc: cannot resolve {}: {}", ep.to_uri(),
                                   ec ? ec.message() : "no address");
          result = make_error_code(errc::unreachable);
          found.clear();
        }
        // The resolver completes on `ex`; dispatch hands the result on to the handler's own executor.
        boost::asio::dispatch(resolver->get_executor(),
                              boost::asio::append(std::move(handler), result, std::move(found)));
      });
}

}  // namespace rdmarpc::transport
