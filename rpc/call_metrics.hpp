#pragma once
// call_metrics: a server's built-in per-method figures (server_options::metrics): calls started,
// finished by status, in flight, a latency histogram, request and response bytes. It is a
// server_interceptor, first in the server's chain, so it sees the calls later interceptors refuse.
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

class call_metrics final : public server_interceptor {
 public:
  // `methods`: the server's method names by method_index (method_table::names()).
  explicit call_metrics(const std::vector<std::string_view>& methods);

  call_verdict on_call_start(const call_info& call, rdmarpc::metadata& initial_metadata) override;
  void on_call_end(const call_info& call, const call_outcome& outcome) override;

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
  counters& of(const call_info& call) noexcept {
    return call.method_index < methods_.size() - 1 ? methods_[call.method_index] : methods_.back();
  }

  std::vector<counters> methods_;  // by method_index, then one for unknown methods
};

}  // namespace rdmarpc
