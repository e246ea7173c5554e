#pragma once
// What an rdma_cm event means once a connection or listener is set up. Pure, so the reactions to
// events the test bed cannot provoke (a bonding failover's ADDR_CHANGE, a device removal) are
// tested on the host. Layer: transport (rdma). Threading: stateless.

#include <rdma/rdma_cma.h>

#include <optional>

#include "transport/error.hpp"

namespace rdmarpc::transport::rdma {

// An established connection: the reason it ends, or nullopt when the event changes nothing.
// DISCONNECTED is not decided here: its reason (the peer's goodbye or a loss) is the lifecycle's.
constexpr std::optional<errc> established_end_reason(rdma_cm_event_type type) noexcept {
  switch (type) {
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return errc::device_error;
    // The IP stack now reaches the peer through another port or device (bonding failover). The
    // old path may still work, but a reconnect follows the IP stack, as nvme-rdma does.
    case RDMA_CM_EVENT_ADDR_CHANGE: return errc::address_changed;
    default: return std::nullopt;
  }
}

enum class listener_action {
  ignore,
  // Destroy the listening id and listen again on the same address and port, retrying while that
  // fails (until the device or address is back).
  rebind,
};

// An event on the listening id itself (not on a connection it accepted). Only a listener bound to
// one address gets these: one on every address is the kernel's to keep per device.
constexpr listener_action listening_id_action(rdma_cm_event_type type) noexcept {
  switch (type) {
    // After a bonding failover a bound listener must be re-created to keep receiving requests
    // (the kernel's own RDMA services, svcrdma and nvmet-rdma, do the same).
    case RDMA_CM_EVENT_ADDR_CHANGE:
    // The kernel needs the id destroyed at once; listening again once the device is back keeps
    // the server serving without a restart.
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return listener_action::rebind;
    default: return listener_action::ignore;
  }
}

// An event on a connection the listener accepted but whose handshake has not completed: true when
// the handshake is dropped (the client gave up, or the path it came on is gone or moved).
constexpr bool drops_pending_handshake(rdma_cm_event_type type) noexcept {
  switch (type) {
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
    case RDMA_CM_EVENT_ADDR_CHANGE: return true;
    default: return false;
  }
}

}  // namespace rdmarpc::transport::rdma
