// Unit tests of ring_queue (transport/ring_queue.hpp), the FIFO behind the rdma send path's
// queues: order across wrap-around and growth, indexing from the oldest record, and a randomized
// run against std::deque as the model.
#include "transport/ring_queue.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <random>

using rdmarpc::transport::ring_queue;

namespace {
struct record {
  std::uint64_t id;
  std::uint32_t tag;
};
}  // namespace

TEST_CASE("ring_queue: first in, first out - indexed from the oldest", "[ring_queue]") {
  ring_queue<record> q;
  CHECK(q.empty());
  for (std::uint64_t i = 0; i < 5; ++i) q.push_back(record{i, static_cast<std::uint32_t>(i * 10)});
  REQUIRE(q.size() == 5);
  CHECK(q.front().id == 0);
  CHECK(q[3].tag == 30);
  q.pop_front();
  CHECK(q.front().id == 1);
  CHECK(q[3].id == 4);
  q.front().tag = 7;  // records are changed in place
  CHECK(q[0].tag == 7);
  q.clear();
  CHECK(q.empty());
  q.push_back(record{9, 0});  // usable after clear()
  CHECK(q.size() == 1);
  CHECK(q.front().id == 9);
}

TEST_CASE("ring_queue: a moved-from queue is empty and usable", "[ring_queue]") {
  ring_queue<record> a;
  for (std::uint64_t i = 0; i < 20; ++i) a.push_back(record{i, 0});
  ring_queue<record> b(std::move(a));
  CHECK(b.size() == 20);
  CHECK(b[19].id == 19);
  CHECK(a.empty());  // NOLINT(bugprone-use-after-move): what this test is about
  a.push_back(record{100, 0});
  CHECK(a.front().id == 100);
  b = std::move(a);
  CHECK(b.size() == 1);
  CHECK(b.front().id == 100);
  CHECK(a.empty());  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("ring_queue: growing while wrapped keeps the order", "[ring_queue]") {
  ring_queue<record> q;
  // Fill the first 16-slot array, drain part of it so the head moves, then wrap and grow.
  for (std::uint64_t i = 0; i < 16; ++i) q.push_back(record{i, 0});
  for (int i = 0; i < 10; ++i) q.pop_front();
  for (std::uint64_t i = 16; i < 60; ++i) q.push_back(record{i, 0});
  REQUIRE(q.size() == 50);
  for (std::size_t i = 0; i < q.size(); ++i) CHECK(q[i].id == 10 + i);
  std::uint64_t expected = 10;
  q.for_each([&](const record& r) { CHECK(r.id == expected++); });
  CHECK(expected == 60);
}

TEST_CASE("ring_queue: random pushes and pops match std::deque", "[ring_queue]") {
  std::mt19937 rng(42);
  ring_queue<record> q;
  std::deque<record> model;
  std::uint64_t next = 0;
  for (int step = 0; step < 20000; ++step) {
    // Phases that mostly push, then mostly pop, so the queue grows and empties many times.
    const bool pushing_phase = (step / 500) % 2 == 0;
    const bool push = model.empty() || (rng() % 4 == 0) != pushing_phase;
    if (push) {
      const record r{next++, static_cast<std::uint32_t>(rng())};
      q.push_back(r);
      model.push_back(r);
    } else {
      q.pop_front();
      model.pop_front();
    }
    REQUIRE(q.size() == model.size());
    if (!model.empty()) {
      REQUIRE(q.front().id == model.front().id);
      const std::size_t i = rng() % model.size();
      REQUIRE(q[i].id == model[i].id);
      REQUIRE(q[i].tag == model[i].tag);
    }
  }
}
