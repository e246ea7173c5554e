// deadline_queue without a channel or a server: due entries come out earliest first, finished
// calls' entries are skipped or compacted away (memory stays bounded by the calls in flight), and
// a random run against a brute-force model.
#include "rpc/deadline_queue.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

namespace {

using queue = rdmarpc::deadline_queue<std::uint32_t>;
using clock = queue::clock;
const clock::time_point t0 = clock::time_point() + std::chrono::hours(1);
clock::time_point at(int ms) {
  return t0 + std::chrono::milliseconds(ms);
}

}  // namespace

TEST_CASE("deadline queue: due entries come out earliest first, the rest stay") {
  queue q;
  q.add(at(30), 3);
  q.add(at(10), 1);
  q.add(at(20), 2);
  q.add(at(40), 4);
  std::vector<std::uint32_t> expired;
  q.pop_due(at(25), [&](std::uint32_t key, clock::time_point d) {
    expired.push_back(key);
    CHECK(d == at(static_cast<int>(key) * 10));
  });
  CHECK(expired == std::vector<std::uint32_t>{1, 2});
  CHECK(q.size() == 2);
  CHECK(q.earliest_live([](std::uint32_t, clock::time_point) { return true; }) == at(30));
  q.pop_due(at(29), [&](std::uint32_t, clock::time_point) { FAIL("nothing is due yet"); });
  q.pop_due(at(30), [&](std::uint32_t key, clock::time_point) { expired.push_back(key); });
  CHECK(expired == std::vector<std::uint32_t>{1, 2, 3});
}

TEST_CASE("deadline queue: expire may add entries while due ones are handed out") {
  queue q;
  q.add(at(10), 1);
  q.add(at(10), 2);
  int calls = 0;
  q.pop_due(at(10), [&](std::uint32_t key, clock::time_point) {
    ++calls;
    q.add(at(100), key + 10);  // re-entrant: the due entries were taken out already
  });
  CHECK(calls == 2);
  CHECK(q.size() == 2);
  CHECK(q.earliest_live([](std::uint32_t, clock::time_point) { return true; }) == at(100));
}

TEST_CASE("deadline queue: when expire throws, the due entries not reached stay") {
  queue q;
  q.add(at(10), 1);
  q.add(at(20), 2);
  q.add(at(30), 3);
  CHECK_THROWS_AS(
      q.pop_due(at(25), [](std::uint32_t, clock::time_point) { throw std::runtime_error("boom"); }),
      std::runtime_error);
  CHECK(q.size() == 2);  // only the one handed out is gone
  std::vector<std::uint32_t> expired;
  q.pop_due(at(25), [&](std::uint32_t key, clock::time_point) { expired.push_back(key); });
  CHECK(expired == std::vector<std::uint32_t>{2});
}

TEST_CASE("deadline queue: the earliest live deadline skips and drops finished calls' entries") {
  queue q;
  const std::set<std::uint32_t> live{3};
  const auto is_live = [&](std::uint32_t key, clock::time_point) { return live.count(key) != 0; };
  q.add(at(10), 1);
  q.add(at(20), 2);
  q.add(at(30), 3);
  CHECK(q.earliest_live(is_live) == at(30));
  CHECK(q.size() == 1);  // 1 and 2 are gone
  queue empty;
  CHECK(empty.earliest_live(is_live) == clock::time_point::max());
}

TEST_CASE("deadline queue: compaction keeps memory bounded by the calls in flight") {
  queue q;
  // One call in flight at a time, each with a deadline far in the future: without compaction the
  // finished calls' entries would pile up until their deadlines came.
  std::uint32_t current = 0;
  const auto is_live = [&](std::uint32_t key, clock::time_point) { return key == current; };
  std::size_t largest = 0;
  for (std::uint32_t id = 1; id <= 10'000; ++id) {
    current = id;
    q.add(at(1'000'000 + static_cast<int>(id)), id);
    q.compact_if(1, is_live);
    largest = std::max(largest, q.size());
  }
  CHECK(largest <= 2 * 1 + 64 + 1);
  CHECK(q.earliest_live(is_live) == at(1'000'000 + 10'000));
  // A live entry survives any number of compactions.
  q.compact_if(0, is_live);
  CHECK(q.size() == 1);
}

TEST_CASE("deadline queue: a random run expires exactly the live calls that are due, in order") {
  std::mt19937 rng(7);
  queue q;
  std::map<std::uint32_t, clock::time_point> live;  // the model: calls in flight and their deadlines
  const auto is_live = [&](std::uint32_t key, clock::time_point d) {
    const auto it = live.find(key);
    return it != live.end() && it->second == d;
  };
  std::uint32_t next_id = 1;
  int now_ms = 0;
  for (int step = 0; step < 20'000; ++step) {
    const auto what = rng() % 10;
    if (what < 5) {  // a call starts
      const auto d = at(now_ms + 1 + static_cast<int>(rng() % 500));
      live[next_id] = d;
      q.add(d, next_id++);
      q.compact_if(live.size(), is_live);
      REQUIRE(q.size() <= 2 * live.size() + 64);  // bounded by the calls in flight
    } else if (what < 8 && !live.empty()) {       // a call finishes early
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      live.erase(it);
    } else {  // time passes; the owner's timer fires
      now_ms += static_cast<int>(rng() % 50);
      std::vector<std::uint32_t> expected;
      for (const auto& [id, d] : live)
        if (d <= at(now_ms)) expected.push_back(id);
      std::vector<std::uint32_t> got;
      clock::time_point last{};
      q.pop_due(at(now_ms), [&](std::uint32_t key, clock::time_point d) {
        CHECK(d >= last);  // earliest first
        last = d;
        if (is_live(key, d)) {
          got.push_back(key);
          live.erase(key);
        }
      });
      std::sort(got.begin(), got.end());
      REQUIRE(got == expected);
      const auto earliest = q.earliest_live(is_live);
      clock::time_point model = clock::time_point::max();
      for (const auto& [id, d] : live) model = std::min(model, d);
      REQUIRE(earliest == model);
    }
  }
}
