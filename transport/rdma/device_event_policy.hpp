#pragma once
// What a device async event (ibv_get_async_event) means for one rdma connection. Pure, so the
// reactions to events the test bed cannot provoke (a QP's fatal or access error, a CQ overrun, a
// device failure) are tested on the host. Layer: transport (rdma). Threading: stateless.

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>

#include "transport/error.hpp"

namespace rdmarpc::transport::rdma {

// What a connection is known to the device by.
struct device_event_target {
  ibv_context* context = nullptr;
  ibv_qp* qp = nullptr;
  ibv_cq* cq = nullptr;
  std::uint8_t port = 0;  // the port its rdma_cm id is bound to
};

// One event as the device reported it; only one of qp, cq and port is meaningful, by type.
struct device_event_info {
  ibv_event_type type{};
  ibv_qp* qp = nullptr;
  ibv_cq* cq = nullptr;
  int port = 0;
};

inline device_event_info describe(const ibv_async_event& event) noexcept {
  device_event_info info;
  info.type = event.event_type;
  switch (event.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: info.qp = event.element.qp; break;
    case IBV_EVENT_CQ_ERR: info.cq = event.element.cq; break;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE: info.port = event.element.port_num; break;
    default: break;  // device-wide (DEVICE_FATAL) or about objects we never make (SRQ, WQ)
  }
  return info;
}

// The reason `event` (from `target`'s device) ends `target`'s connection, or nullopt when it does
// not concern that connection or changes nothing for it.
constexpr std::optional<errc> device_event_end_reason(const device_event_info& event,
                                                      const device_event_target& target) noexcept {
  switch (event.type) {
    // The QP went to the error state (a transport or local error, or a peer's invalid request or
    // access). Its posted receives would come back flushed too; the event says so sooner.
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
      if (event.qp != nullptr && event.qp == target.qp) return errc::queue_pair_error;
      return std::nullopt;
    // The CQ overran (a sizing bug): completions were lost, so credits no longer add up.
    case IBV_EVENT_CQ_ERR:
      if (event.cq != nullptr && event.cq == target.cq) return errc::queue_pair_error;
      return std::nullopt;
    // The link under the port is down: nothing crosses it until it is back, and a channel's
    // reconnect finds another path (or fails fast) instead of waiting for retransmits to run out.
    case IBV_EVENT_PORT_ERR:
      if (event.port == target.port) return errc::port_down;
      return std::nullopt;
    case IBV_EVENT_DEVICE_FATAL: return errc::device_error;
    // Port comes back, address and subnet changes (rdma_cm reports ADDR_CHANGE for what matters to
    // a connection: cm_event_policy.hpp), path migration we never arm, QP progress notices.
    default: return std::nullopt;
  }
}

}  // namespace rdmarpc::transport::rdma
