// device_event_policy: what a device async event means for one rdma connection, including the
// events the VM test bed cannot provoke (a QP's fatal or access error, a CQ overrun, a device
// failure). The port going down is provoked for real in the VM (transport_rdma's device events test).
#include "transport/rdma/device_event_policy.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace rdmarpc::transport;
using namespace rdmarpc::transport::rdma;

namespace {

// Only the pointers' identity matters: the policy never dereferences them.
struct fake_objects {
  ibv_qp qp_a{}, qp_b{};
  ibv_cq cq_a{}, cq_b{};
  device_event_target a{nullptr, &qp_a, &cq_a, 1};
  device_event_target b{nullptr, &qp_b, &cq_b, 2};
};

device_event_info event(ibv_event_type type, ibv_qp* qp = nullptr, ibv_cq* cq = nullptr, int port = 0) {
  return device_event_info{type, qp, cq, port};
}

}  // namespace

TEST_CASE("device_event_policy: a QP error ends the connection of that QP only", "[device_event_policy]") {
  fake_objects f;
  for (const auto type : {IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR}) {
    CAPTURE(ibv_event_type_str(type));
    CHECK(device_event_end_reason(event(type, &f.qp_a), f.a) == errc::queue_pair_error);
    CHECK_FALSE(device_event_end_reason(event(type, &f.qp_a), f.b));
  }
  // A connection whose QP is already gone (null) is never matched by an event about no QP.
  device_event_target gone = f.a;
  gone.qp = nullptr;
  CHECK_FALSE(device_event_end_reason(event(IBV_EVENT_QP_FATAL, nullptr), gone));
  CHECK(make_error_code(errc::queue_pair_error).message().find("queue pair") != std::string::npos);
}

TEST_CASE("device_event_policy: a CQ overrun ends the connection of that CQ only", "[device_event_policy]") {
  fake_objects f;
  CHECK(device_event_end_reason(event(IBV_EVENT_CQ_ERR, nullptr, &f.cq_b), f.b) == errc::queue_pair_error);
  CHECK_FALSE(device_event_end_reason(event(IBV_EVENT_CQ_ERR, nullptr, &f.cq_b), f.a));
}

TEST_CASE("device_event_policy: a port going down ends the connections on that port, a failed device all",
          "[device_event_policy]") {
  fake_objects f;
  CHECK(device_event_end_reason(event(IBV_EVENT_PORT_ERR, nullptr, nullptr, 1), f.a) == errc::port_down);
  CHECK_FALSE(device_event_end_reason(event(IBV_EVENT_PORT_ERR, nullptr, nullptr, 1), f.b));
  CHECK(device_event_end_reason(event(IBV_EVENT_DEVICE_FATAL), f.a) == errc::device_error);
  CHECK(device_event_end_reason(event(IBV_EVENT_DEVICE_FATAL), f.b) == errc::device_error);
  CHECK(make_error_code(errc::port_down).message().find("port went down") != std::string::npos);
}

TEST_CASE("device_event_policy: notices and recoveries end nothing", "[device_event_policy]") {
  fake_objects f;
  for (const auto type : {IBV_EVENT_COMM_EST, IBV_EVENT_SQ_DRAINED, IBV_EVENT_PATH_MIG,
                          IBV_EVENT_PATH_MIG_ERR, IBV_EVENT_QP_LAST_WQE_REACHED}) {
    CAPTURE(ibv_event_type_str(type));
    CHECK_FALSE(device_event_end_reason(event(type, &f.qp_a), f.a));
  }
  for (const auto type : {IBV_EVENT_PORT_ACTIVE, IBV_EVENT_LID_CHANGE, IBV_EVENT_PKEY_CHANGE,
                          IBV_EVENT_SM_CHANGE, IBV_EVENT_CLIENT_REREGISTER, IBV_EVENT_GID_CHANGE}) {
    CAPTURE(ibv_event_type_str(type));
    CHECK_FALSE(device_event_end_reason(event(type, nullptr, nullptr, 1), f.a));
  }
  CHECK_FALSE(device_event_end_reason(event(IBV_EVENT_SRQ_ERR), f.a));
}

TEST_CASE("device_event_policy: describe() takes the element the event type names", "[device_event_policy]") {
  fake_objects f;
  ibv_async_event raw{};
  raw.event_type = IBV_EVENT_QP_ACCESS_ERR;
  raw.element.qp = &f.qp_b;
  auto info = describe(raw);
  CHECK(info.qp == &f.qp_b);
  CHECK(info.cq == nullptr);
  CHECK(device_event_end_reason(info, f.b) == errc::queue_pair_error);

  raw = {};
  raw.event_type = IBV_EVENT_CQ_ERR;
  raw.element.cq = &f.cq_a;
  info = describe(raw);
  CHECK(info.cq == &f.cq_a);
  CHECK(info.qp == nullptr);

  raw = {};
  raw.event_type = IBV_EVENT_PORT_ERR;
  raw.element.port_num = 2;
  info = describe(raw);
  CHECK(info.port == 2);
  CHECK(info.qp == nullptr);
  CHECK(device_event_end_reason(info, f.b) == errc::port_down);
  CHECK_FALSE(device_event_end_reason(info, f.a));
}
