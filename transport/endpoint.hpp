#pragma once
// Transport endpoints parsed from URIs: "rdma://host:port", "tcp://host:port", "tcp://[::1]:port".
// Layer: transport. Threading: plain values.

#include <boost/system/result.hpp>
#include <cstdint>
#include <string>
#include <string_view>

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

}  // namespace rdmarpc::transport
