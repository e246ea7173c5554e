// cm_event_policy: what rdma_cm events mean once a connection or listener is set up, including the
// ones the VM test bed cannot provoke (a bonding failover's ADDR_CHANGE, a device removal).
#include "transport/rdma/cm_event_policy.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace rdmarpc::transport;
using namespace rdmarpc::transport::rdma;

TEST_CASE("cm_event_policy: an established connection ends on device removal and on an address change",
          "[cm_event_policy]") {
  CHECK(established_end_reason(RDMA_CM_EVENT_DEVICE_REMOVAL) == errc::device_error);
  CHECK(established_end_reason(RDMA_CM_EVENT_ADDR_CHANGE) == errc::address_changed);
  // (Its calls fail UNAVAILABLE: rpc's status_test.)
  CHECK(make_error_code(errc::address_changed).message().find("ADDR_CHANGE") != std::string::npos);
  // Nothing else ends it here (DISCONNECTED is the lifecycle's to decide).
  for (const auto type : {RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_TIMEWAIT_EXIT, RDMA_CM_EVENT_DISCONNECTED,
                          RDMA_CM_EVENT_MULTICAST_JOIN}) {
    CAPTURE(rdma_event_str(type));
    CHECK_FALSE(established_end_reason(type));
  }
}

TEST_CASE("cm_event_policy: a bound listener listens again after an address change or a device removal",
          "[cm_event_policy]") {
  CHECK(listening_id_action(RDMA_CM_EVENT_ADDR_CHANGE) == listener_action::rebind);
  CHECK(listening_id_action(RDMA_CM_EVENT_DEVICE_REMOVAL) == listener_action::rebind);
  for (const auto type :
       {RDMA_CM_EVENT_TIMEWAIT_EXIT, RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_ESTABLISHED}) {
    CAPTURE(rdma_event_str(type));
    CHECK(listening_id_action(type) == listener_action::ignore);
  }
}

TEST_CASE("cm_event_policy: a handshake in progress is dropped when its client or its path goes",
          "[cm_event_policy]") {
  for (const auto type :
       {RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_UNREACHABLE,
        RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_DEVICE_REMOVAL, RDMA_CM_EVENT_ADDR_CHANGE}) {
    CAPTURE(rdma_event_str(type));
    CHECK(drops_pending_handshake(type));
  }
  // ESTABLISHED completes it; the rest change nothing.
  CHECK_FALSE(drops_pending_handshake(RDMA_CM_EVENT_ESTABLISHED));
  CHECK_FALSE(drops_pending_handshake(RDMA_CM_EVENT_TIMEWAIT_EXIT));
}
