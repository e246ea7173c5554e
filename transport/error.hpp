#pragma once
// Error codes of the transport layer (rdmarpc::transport::errc) and their category.
// Layer: transport. Threading: stateless, safe from any thread.
// The rpc layer maps these to canonical status codes (see rpc/status.hpp).

#include <boost/system/error_code.hpp>
#include <type_traits>

namespace rdmarpc::transport {

enum class errc {
  // 0 is success
  closed_locally = 1,  // close() was called on this side
  closed_by_peer,      // the peer closed gracefully, after its goodbye (a close before start is not)
  connection_lost,     // the peer vanished: process death, QP error, reset, keepalive timeout
  message_too_large,   // larger than the negotiated maximum message size; nothing was sent
  protocol_error,      // the peer sent something malformed; the connection was closed
  handshake_rejected,  // the peer refused the connection (bad private data, version, full)
  unreachable,         // address or route resolution failed, nothing listening, or refused
  connect_timeout,     // connection setup took longer than connection_options::connect_timeout
  rnr_retry_exceeded,  // the peer's receive queue was empty: a credit bug; must never happen
  device_error,        // the RDMA device failed or was removed
  bad_uri,             // not "scheme://host:port"
  unsupported_scheme,  // a scheme this build cannot serve
  not_connected,       // operation on a connection that is not open (yet or any more)
  // A new rdma connection would take the registered-memory budget past its limit
  // (connection_options::registered_memory); nothing was allocated for it. Also the end reason of
  // a connection that could not register a large message's own send buffer (the system refused
  // the memory: RLIMIT_MEMLOCK); what it carried fails UNAVAILABLE.
  registered_memory_exhausted,
  // The IP stack moved the connection's local address to another port or device (rdma_cm
  // ADDR_CHANGE, e.g. a bonding failover); the connection was closed so the next one follows it.
  address_changed,
  // The device reported the connection's QP in error (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR) or its
  // CQ overrun (CQ_ERR) on its async event fd (connection_options::device_events).
  queue_pair_error,
  // The RDMA port the connection runs on went down (PORT_ERR: its link is lost); ended at once
  // instead of when retransmits or heartbeats run out (connection_options::device_events).
  port_down,
};

const boost::system::error_category& transport_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), transport_category()};
}

}  // namespace rdmarpc::transport

template <>
struct boost::system::is_error_code_enum<rdmarpc::transport::errc> : std::true_type {};
