#include "bench/common/closed_loop.hpp"

#include <catch2/catch.hpp>
#include <deque>
#include <memory>

using rdmarpc::bench::closed_loop;
using rdmarpc::bench::load_spec;
using namespace std::chrono_literals;

namespace {

// Drives a closed_loop with a simulated clock: every call takes `service` and they complete in the
// order they started, like one server answering in order. Returns the calls started in total.
std::uint64_t drive(closed_loop& loop, std::uint64_t concurrency, closed_loop::clock::time_point t0,
                    std::chrono::nanoseconds service, std::uint64_t max_steps = 1'000'000) {
  std::deque<closed_loop::clock::time_point> in_flight;
  auto now = t0;
  std::uint64_t started = 0;
  for (std::uint64_t step = 0; step < max_steps && !loop.finished(); ++step) {
    while (in_flight.size() < concurrency && loop.may_start()) {
      in_flight.push_back(now);
      loop.on_start();
      ++started;
    }
    if (in_flight.empty()) break;
    now = std::max(now, in_flight.front() + service);
    loop.on_complete(in_flight.front(), now, true);
    in_flight.pop_front();
  }
  return started;
}

}  // namespace

TEST_CASE("call-count mode measures exactly N calls after exactly the warm-up calls", "[closed_loop]") {
  load_spec spec;
  spec.warmup = 0ns;
  spec.warmup_calls = 10;
  spec.calls = 100;
  const auto t0 = closed_loop::clock::time_point{};
  auto loop = std::make_unique<closed_loop>(spec, t0);
  const auto started = drive(*loop, 1, t0, 10us);
  REQUIRE(loop->finished());
  REQUIRE(loop->completed() == 100);
  REQUIRE(loop->errors() == 0);
  REQUIRE(started == 110);  // repeatable totals are what lets callgrind runs be differenced
  REQUIRE(loop->latency().count() == 100);
  REQUIRE(loop->latency().percentile(50) == 10'000);
  REQUIRE(loop->measured_time(t0) == 100 * 10us);
}

TEST_CASE("duration mode stops after the duration and drains what is in flight", "[closed_loop]") {
  load_spec spec;
  spec.warmup = 1ms;
  spec.duration = 10ms;
  const auto t0 = closed_loop::clock::time_point{};
  auto loop = std::make_unique<closed_loop>(spec, t0);
  drive(*loop, 8, t0, 100us);
  REQUIRE(loop->finished());
  REQUIRE(loop->outstanding() == 0);
  // 8 in flight, 100 us each, completing in order: one completion per 100 us / 8 after the ramp.
  REQUIRE(loop->completed() >= 700);
  REQUIRE(loop->completed() <= 900);
  REQUIRE(loop->measured_time(t0) >= 10ms);
  REQUIRE(loop->latency().count() == loop->completed());
}

TEST_CASE("calls in flight when measuring starts count, with their whole latency", "[closed_loop]") {
  load_spec spec;
  spec.warmup = 0ns;
  spec.calls = 3;
  const auto t0 = closed_loop::clock::time_point{};
  closed_loop loop(spec, t0);
  for (int i = 0; i < 3; ++i) loop.on_start();
  loop.on_complete(t0, t0 + 1ms, true);  // ends the warm-up; two calls are still out
  REQUIRE(loop.measuring());
  REQUIRE(loop.may_start());  // 0 completed + 2 in flight < 3
  loop.on_start();
  REQUIRE_FALSE(loop.may_start());
  loop.on_complete(t0, t0 + 2ms, true);
  loop.on_complete(t0, t0 + 3ms, true);
  loop.on_complete(t0 + 1ms, t0 + 4ms, true);
  REQUIRE(loop.finished());
  REQUIRE(loop.completed() == 3);
  REQUIRE(loop.latency().max() == 3'000'000);
  REQUIRE(loop.measured_time(t0) == 3ms);
}

TEST_CASE("failed calls are counted as errors, not as latencies", "[closed_loop]") {
  load_spec spec;
  spec.warmup = 0ns;
  spec.calls = 4;
  const auto t0 = closed_loop::clock::time_point{};
  closed_loop loop(spec, t0);
  loop.on_start();
  loop.on_complete(t0, t0 + 1us, true);  // ends the (empty) warm-up
  REQUIRE(loop.measuring());
  for (int i = 0; i < 4; ++i) {
    REQUIRE(loop.may_start());
    loop.on_start();
  }
  REQUIRE_FALSE(loop.may_start());  // exactly `calls` measured calls are issued
  loop.on_complete(t0 + 1us, t0 + 3us, true);
  loop.on_complete(t0 + 1us, t0 + 4us, false);
  loop.on_complete(t0 + 1us, t0 + 5us, true);
  REQUIRE_FALSE(loop.finished());
  loop.on_complete(t0 + 1us, t0 + 6us, false);
  REQUIRE(loop.finished());
  REQUIRE(loop.completed() == 2);
  REQUIRE(loop.errors() == 2);
  REQUIRE(loop.latency().count() == 2);
  REQUIRE(loop.latency().max() == 4000);
}
