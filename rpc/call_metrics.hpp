#pragma once
// call_metrics: a server's built-in per-method figures (server_options::metrics): calls started,
// finished by status, in flight, a latency histogram, request and response bytes. Each connection
// calls it directly (no interceptor's virtual calls or call_info), before its interceptors start
// and after they end, so it sees the calls they refuse.
// Layer: rpc. Threading: the hooks run on every connection thread (relaxed atomics, no lock);
// snapshot() from any thread.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rpc/interceptor.hpp"
#include "rpc/latency_histogram.hpp"

namespace rdmarpc {

inline constexpr std::size_t kStatusCodes = 17;  // canonical codes 0..16

// One method's figures at one instant.
struct method_stats {
  std::string name;  // "/kv.Store/Get"; "" for calls to unknown method ids
  std::uint64_t started = 0;
  std::array<std::uint64_t, kStatusCodes> finished{};  // by status_code
  std::uint64_t request_bytes = 0;
  std::uint64_t response_bytes = 0;
  latency_histogram::snapshot latency;  // of finished calls, from start to end

  std::uint64_t finished_total() const noexcept {
    std::uint64_t n = 0;
    for (auto f : finished) n += f;
    return n;
  }
  std::uint64_t in_flight() const noexcept {
    const auto done = finished_total();
    return started > done ? started - done : 0;
  }
};

class call_metrics final {
 public:
  // `methods`: the server's method names by method_index (method_table::names()).
  explicit call_metrics(const std::vector<std::string_view>& methods);

  // A call or stream of method `method_index` (call_info::kUnknownMethod for an unknown id)
  // started; it ended with `outcome`. Inlined into the connection's call path.
  void call_started(std::size_t method_index) noexcept {
    of(method_index).started.fetch_add(1, std::memory_order_relaxed);
  }
  void call_ended(std::size_t method_index, const call_outcome& outcome) noexcept {
    counters& c = of(method_index);
    const auto code = static_cast<std::size_t>(outcome.code);
    c.finished[code < kStatusCodes ? code : static_cast<std::size_t>(status_code::unknown)].fetch_add(
        1, std::memory_order_relaxed);
    if (outcome.request_bytes != 0)
      c.request_bytes.fetch_add(outcome.request_bytes, std::memory_order_relaxed);
    if (outcome.response_bytes != 0)
      c.response_bytes.fetch_add(outcome.response_bytes, std::memory_order_relaxed);
    c.latency.record(outcome.elapsed);
  }

  // Every method's figures, in registration order, then the unknown methods' (name "") when any
  // was called.
  std::vector<method_stats> snapshot() const;

 private:
  struct counters {
    std::string name;
    std::atomic<std::uint64_t> started{0};
    std::array<std::atomic<std::uint64_t>, kStatusCodes> finished{};
    std::atomic<std::uint64_t> request_bytes{0}, response_bytes{0};
    latency_histogram latency;
  };
  counters& of(std::size_t method_index) noexcept {
    return method_index < methods_.size() - 1 ? methods_[method_index] : methods_.back();
  }

  std::vector<counters> methods_;  // by method_index, then one for unknown methods
};

}  // namespace rdmarpc
