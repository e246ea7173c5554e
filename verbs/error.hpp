#pragma once
// Error categories of the verbs layer: work-completion status (ibv_wc_status, named with
// ibv_wc_status_str) and unexpected rdma_cm events (named with rdma_event_str).
// Layer: verbs. Threading: stateless.

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <boost/system/error_code.hpp>

namespace rdmarpc::verbs {

const boost::system::error_category& wc_status_category() noexcept;
const boost::system::error_category& cm_event_category() noexcept;

inline boost::system::error_code make_wc_error(ibv_wc_status status) noexcept {
  return {static_cast<int>(status), wc_status_category()};
}
inline boost::system::error_code make_cm_event_error(rdma_cm_event_type event) noexcept {
  return {static_cast<int>(event), cm_event_category()};
}
// errno from a failed ibv_*/rdma_* call, as a system error_code.
inline boost::system::error_code last_errno_error(int err) noexcept {
  return {err, boost::system::system_category()};
}

}  // namespace rdmarpc::verbs
