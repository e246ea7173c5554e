#include "rpc/call_metrics.hpp"

namespace rdmarpc {

call_metrics::call_metrics(const std::vector<std::string_view>& methods) : methods_(methods.size() + 1) {
  for (std::size_t i = 0; i < methods.size(); ++i) methods_[i].name = methods[i];
}

std::vector<method_stats> call_metrics::snapshot() const {
  std::vector<method_stats> out;
  out.reserve(methods_.size());
  for (std::size_t i = 0; i < methods_.size(); ++i) {
    const counters& c = methods_[i];
    method_stats s;
    s.name = c.name;
    // Finished first: a call counts as started before it can finish, so in_flight() never wraps.
    for (std::size_t k = 0; k < kStatusCodes; ++k)
      s.finished[k] = c.finished[k].load(std::memory_order_relaxed);
    s.started = c.started.load(std::memory_order_relaxed);
    s.request_bytes = c.request_bytes.load(std::memory_order_relaxed);
    s.response_bytes = c.response_bytes.load(std::memory_order_relaxed);
    s.latency = c.latency.take();
    // The unknown methods' row only when something was called there.
    if (i + 1 == methods_.size() && s.started == 0) break;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace rdmarpc
