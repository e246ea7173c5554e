#pragma once
// The rdma_cm connection parameters both sides send (our handshake in the private data, retry
// policy), so the connector and the listener cannot drift apart. Layer: transport.
// Threading: stateless.

#include <rdma/rdma_cma.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/connection.hpp"
#include "transport/rdma/wire.hpp"

namespace rdmarpc::transport::rdma {

// What we announce to the peer: our ring and the largest message we accept.
inline std::array<std::byte, wire::kHandshakeSize> encode_local_handshake(const connection_options& options) {
  return wire::encode_handshake(
      {wire::kProtocolVersion, options.recv_ring_depth, options.slot_size,
       static_cast<std::uint32_t>(std::min<std::size_t>(options.max_message_size, UINT32_MAX))});
}

// For rdma_connect / rdma_accept. `hello` must outlive the call that uses the result.
inline rdma_conn_param make_conn_param(const std::array<std::byte, wire::kHandshakeSize>& hello,
                                       const connection_options& options) {
  rdma_conn_param param{};
  param.private_data = hello.data();
  param.private_data_len = static_cast<std::uint8_t>(hello.size());
  param.retry_count = std::min<std::uint8_t>(options.retry_count, 7);
  param.rnr_retry_count = 0;  // a credit bug must show up at once as RNR_RETRY_EXC_ERR
  return param;
}

// The private data an rdma_cm event carries (the peer's handshake, or a listener's reject); empty
// when it has none.
inline std::span<const std::byte> private_data(const rdma_cm_event& event) noexcept {
  const auto* data = static_cast<const std::byte*>(event.param.conn.private_data);
  return data != nullptr ? std::span<const std::byte>(data, event.param.conn.private_data_len)
                         : std::span<const std::byte>();
}

// The QP's local ACK timeout (connection_options::ack_timeout_exponent), applied by rdma_cm when
// it moves the QP to RTS. Call on the active side before rdma_resolve_route, on the passive side
// before rdma_accept. False (errno set) if the option is refused.
inline bool set_ack_timeout(rdma_cm_id* id, const connection_options& options) {
  std::uint8_t exponent = std::min<std::uint8_t>(options.ack_timeout_exponent, 31);
  return rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &exponent, sizeof exponent) == 0;
}

}  // namespace rdmarpc::transport::rdma
