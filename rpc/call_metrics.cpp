#include "rpc/call_metrics.hpp"

namespace rdmarpc {

call_metrics::call_metrics(const std::vector<std::string_view>& methods) : methods_(methods.size() + 1) {
  for (std::size_t i = 0; i < methods.size(); ++i) methods_[i].name = methods[i];
}

call_verdict call_metrics::on_call_start(const call_info& call, rdmarpc::metadata&) {
  of(call).started.fetch_add(1, std::memory_order_relaxed);
  return {};
}

void call_metrics::on_call_end(const call_info& call, const call_outcome& outcome) {
  counters& c = of(call);
  const auto code = static_cast<std::size_t>(outcome.code);
  c.finished[code < kStatusCodes ? code : static_cast<std::size_t>(status_code::unknown)].fetch_add(
      1, std::memory_order_relaxed);
  if (outcome.request_bytes != 0) c.request_bytes.fetch_add(outcome.request_bytes, std::memory_order_relaxed);
  if (outcome.response_bytes != 0)
    c.response_bytes.fetch_add(outcome.response_bytes, std::memory_order_relaxed);
  c.latency.record(outcome.elapsed);
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
