#include "transport/endpoint.hpp"

#include <boost/asio/ip/address.hpp>
#include <charconv>

#include "transport/error.hpp"

namespace rdmarpc::transport {

std::string endpoint::to_uri() const {
  std::string uri = scheme == scheme::rdma ? "rdma://" : "tcp://";
  if (host.find(':') != std::string::npos) {
    uri += '[' + host + ']';
  } else {
    uri += host;
  }
  return uri + ':' + std::to_string(port);
}

boost::system::result<endpoint> parse_endpoint(std::string_view uri) {
  endpoint ep;
  const auto sep = uri.find("://");
  if (sep == std::string_view::npos) return make_error_code(errc::bad_uri);
  const std::string_view scheme_name = uri.substr(0, sep);
  if (scheme_name == "rdma") {
    ep.scheme = scheme::rdma;
  } else if (scheme_name == "tcp") {
    ep.scheme = scheme::tcp;
  } else {
    return make_error_code(errc::unsupported_scheme);
  }
  std::string_view rest = uri.substr(sep + 3);
  std::string_view host, port;
  if (!rest.empty() && rest.front() == '[') {  // [ipv6]:port
    const auto close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return make_error_code(errc::bad_uri);
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos || rest.find(':') != colon) return make_error_code(errc::bad_uri);
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty() || port.empty() || host.find_first_of("/ ") != std::string_view::npos)
    return make_error_code(errc::bad_uri);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value > 65535)
    return make_error_code(errc::bad_uri);
  ep.host = std::string(host);
  ep.port = static_cast<std::uint16_t>(value);
  return ep;
}

boost::system::result<std::vector<endpoint>> parse_endpoint_list(std::string_view uris) {
  std::vector<endpoint> list;
  const auto sep = uris.find("://");
  if (sep == std::string_view::npos) return make_error_code(errc::bad_uri);
  const std::string_view first_scheme = uris.substr(0, sep + 3);
  while (true) {
    const auto comma = uris.find(',');
    const std::string_view entry = uris.substr(0, comma);
    auto ep = entry.find("://") != std::string_view::npos
                  ? parse_endpoint(entry)
                  : parse_endpoint(std::string(first_scheme).append(entry));
    if (!ep) return ep.error();
    list.push_back(std::move(*ep));
    if (comma == std::string_view::npos) break;
    uris.remove_prefix(comma + 1);
  }
  return list;
}

bool is_numeric_host(std::string_view host) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(std::string(host), ec);
  return !ec;
}

}  // namespace rdmarpc::transport
