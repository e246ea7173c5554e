#pragma once
// Admission and authentication hooks of a server (server_options::admit_connection, check_call):
// the read-only views they are given and the verdict a call check returns; interceptors
// (rpc/interceptor.hpp) see the same call_info and answer the same verdict. Layer: rpc.
// Threading: the views are valid only during the hook's call; see server_options for which thread
// runs each hook.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "rpc/client_context.hpp"  // metadata
#include "rpc/status.hpp"

namespace rdmarpc {

// The other end of a connection, as parts of its address (no copies: views into it).
struct peer_info {
  std::string_view address;    // "tcp://10.0.0.2:50312", "rdma://[fe80::1]:7471", "loopback://a"
  std::string_view transport;  // the address's scheme: "tcp", "rdma", "loopback"
  std::string_view host;       // "10.0.0.2", "[fe80::1]" (as in the address), "a"

  // Splits an address as transport::connection::remote_address() gives it. Never throws; an
  // address without "://" is all host (transport empty), one without a port is host to the end.
  static peer_info from_address(std::string_view address) noexcept;
};

// A call or stream about to start: its limits were checked and its metadata parsed; its request
// is not parsed yet and its handler has not run.
struct call_info {
  std::string_view method;            // full name "/pkg.Service/Method"; empty for an unknown method id
  const rdmarpc::metadata& metadata;  // the client's (client_context::add_metadata)
  const peer_info& peer;              // the connection's
  bool stream = false;                // a stream (stream_open) rather than a unary request
  // The method's place among the server's methods, 0..server::method_names().size()-1 in
  // registration order (a dense index for per-method tables); kUnknownMethod for an unknown id.
  static constexpr std::size_t kUnknownMethod = static_cast<std::size_t>(-1);
  std::size_t method_index = kUnknownMethod;
};

// What a call check answers: ok lets the call through; any other code is the status the client's
// call or stream ends with, with `message` (client_context::status_message).
struct call_verdict {
  status_code code = status_code::ok;
  std::string message;
};

// A new connection's peer -> true admits it. See server_options::admit_connection.
using connection_admission = std::function<bool(const peer_info& peer)>;
// A call about to start -> its verdict. See server_options::check_call.
using call_check = std::function<call_verdict(const call_info& call)>;

}  // namespace rdmarpc
