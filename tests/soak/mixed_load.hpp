#pragma once
// mixed_load: the fault soak's clients. Several channels, each over the whole list of server
// endpoints with round_robin (so calls move to the servers that are up), each running a few closed
// loops of calls against tests/rpc/test_service: small and 1 MiB unary Echo, server-streaming
// Ticks, client-streaming Sum and bidi Chat, every call with a deadline. Every call is accounted
// for exactly once: OK with a verified reply, a non-OK status (by code), a wrong reply, late
// (completed past its deadline + margin) or hung (not completed by then). Test support.
// Threading: the channels run on `client_threads` io threads of their own; every member may be
// called from any thread.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rpc/channel.hpp"

namespace rdmarpc::soak {

enum class call_kind : std::uint8_t { echo_small, echo_large, ticks, sum, chat };
inline constexpr std::size_t kCallKinds = 5;
std::string_view to_string(call_kind k) noexcept;

struct load_options {
  std::size_t channels = 8;
  std::size_t calls_per_channel = 4;  // closed loops per channel: its calls in flight
  std::size_t client_threads = 2;
  std::size_t large_bytes = 1 << 20;  // the large messages (Echo both ways, a stream's big one)
  unsigned large_percent = 5;         // of unary calls and of streams, carrying a large message
  unsigned wait_for_ready_percent = 25;
  std::chrono::milliseconds deadline{2000};        // small unary calls
  std::chrono::milliseconds large_deadline{5000};  // large calls and streams
  // How far past its deadline a call may complete before it counts as late (scheduling on a
  // loaded host; the framework itself should complete within milliseconds of the deadline).
  std::chrono::milliseconds margin{1000};
  std::uint64_t seed = 1;
};

// What became of the calls so far. started = ok + sum(failed) + wrong + late + hung + in_flight.
struct load_counts {
  struct per_kind {
    std::uint64_t started = 0, ok = 0, failed = 0;
  };
  std::uint64_t started = 0;
  std::uint64_t ok = 0;
  std::map<std::string, std::uint64_t> failed;  // non-OK status in time, by code ("UNAVAILABLE")
  std::uint64_t wrong = 0;                      // OK, but the reply was not what was asked for
  std::uint64_t late = 0;                       // completed past deadline + margin (any status)
  std::uint64_t hung = 0;                       // not completed by deadline + margin
  std::uint64_t in_flight = 0;                  // started, not yet accounted for
  std::array<per_kind, kCallKinds> kinds{};
  // The latest completion relative to its deadline, in ms (negative: every call completed early);
  // empty before the first completion.
  std::optional<double> max_overrun_ms;
  std::vector<std::string> first_problems;  // the first few wrong/late/hung calls, described

  std::uint64_t failed_total() const;
  bool clean() const noexcept { return wrong == 0 && late == 0 && hung == 0; }
};

class mixed_load {
 public:
  // Starts the load at once against `uri_list` ("tcp://127.0.0.1:7000,127.0.0.1:7001").
  mixed_load(const std::string& uri_list, load_options options);
  ~mixed_load();  // stops (if not stopped) and tears the channels down
  mixed_load(const mixed_load&) = delete;
  mixed_load& operator=(const mixed_load&) = delete;

  load_counts counts() const;
  // Counts calls not completed by deadline + margin as hung (once each); call it every second or
  // so. A hung call that completes later stays counted as hung.
  void check_hung();
  // Starts no new calls and waits until every loop finished its call, at most `limit`; false when
  // some did not (their calls are then counted as hung).
  bool stop(std::chrono::milliseconds limit);
  // The channels' counters summed (connects, disconnects, heartbeat timeouts, ...).
  channel_stats channel_totals() const;
  // The longest any call may take before it counts as hung: for stop()'s limit.
  std::chrono::milliseconds longest_call() const noexcept;

  class impl;

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace rdmarpc::soak
