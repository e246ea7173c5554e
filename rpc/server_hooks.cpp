#include "rpc/server_hooks.hpp"

namespace rdmarpc {

peer_info peer_info::from_address(std::string_view address) noexcept {
  peer_info p;
  p.address = address;
  std::string_view rest = address;
  if (const auto scheme_end = address.find("://"); scheme_end != std::string_view::npos) {
    p.transport = address.substr(0, scheme_end);
    rest = address.substr(scheme_end + 3);
  }
  // The port is what follows the last ':' outside an IPv6 literal's brackets.
  const auto colon = rest.rfind(':');
  const auto bracket = rest.rfind(']');
  const bool has_port = colon != std::string_view::npos &&
                        (bracket == std::string_view::npos || colon > bracket) &&
                        (rest.front() == '[' || rest.find(':') == colon);  // a bare IPv6 address has no port
  p.host = has_port ? rest.substr(0, colon) : rest;
  return p;
}

}  // namespace rdmarpc
