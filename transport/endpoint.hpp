#pragma once
// Transport endpoints parsed from URIs: "rdma://host:port", "tcp://host:port", "tcp://[::1]:port".
// Layer: transport. Threading: plain values.

#include <boost/system/result.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rdmarpc::transport {

enum class scheme { rdma, tcp };

struct endpoint {
  transport::scheme scheme = scheme::tcp;
  std::string host;        // name or numeric address, without brackets
  std::uint16_t port = 0;  // 0 = any (listeners pick one; see listener::local_endpoint)

  std::string to_uri() const;  // inverse of parse_endpoint
  friend bool operator==(const endpoint&, const endpoint&) = default;
};

// errc::bad_uri or errc::unsupported_scheme on failure.
boost::system::result<endpoint> parse_endpoint(std::string_view uri);

// A comma-separated list of endpoints: "rdma://10.0.0.1:7471,10.0.0.2:7471" (the first scheme
// applies to entries without one) or "tcp://a:1,rdma://b:2". One entry is parse_endpoint. Empty
// entries, and any entry parse_endpoint refuses, fail the whole list (errc::bad_uri or
// errc::unsupported_scheme).
boost::system::result<std::vector<endpoint>> parse_endpoint_list(std::string_view uris);

// True when `host` is a numeric IPv4 or IPv6 address (nothing to resolve).
bool is_numeric_host(std::string_view host);

}  // namespace rdmarpc::transport
