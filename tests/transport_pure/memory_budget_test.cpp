// memory_budget: leases up to the limit, returned when destroyed, from any thread.
#include "transport/memory_budget.hpp"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

using rdmarpc::transport::memory_budget;

TEST_CASE("memory_budget: leases up to the limit and no further, a returned lease makes room",
          "[memory_budget]") {
  auto budget = memory_budget::create(100);
  auto a = budget->try_acquire(60);
  REQUIRE(a);
  CHECK(budget->in_use() == 60);
  CHECK_FALSE(budget->try_acquire(41));
  auto b = budget->try_acquire(40);
  REQUIRE(b);
  CHECK(budget->in_use() == 100);
  CHECK_FALSE(budget->try_acquire(1));
  a->reset();
  CHECK(budget->in_use() == 40);
  {
    auto c = budget->try_acquire(60);
    CHECK(c);
  }
  CHECK(budget->in_use() == 40);
  CHECK_FALSE(budget->try_acquire(std::size_t(-1)));  // no overflow past the limit
}

TEST_CASE("memory_budget: a moved lease is returned once", "[memory_budget]") {
  auto budget = memory_budget::create(10);
  memory_budget::lease kept;
  {
    auto l = budget->try_acquire(7);
    REQUIRE(l);
    kept = std::move(*l);
  }
  CHECK(budget->in_use() == 7);
  CHECK(kept.bytes() == 7);
  kept = memory_budget::lease();
  CHECK(budget->in_use() == 0);
}

TEST_CASE("memory_budget: threads racing never exceed the limit", "[memory_budget]") {
  auto budget = memory_budget::create(1000);
  std::vector<std::thread> threads;
  std::atomic<int> over{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        auto l = budget->try_acquire(300);
        if (budget->in_use() > budget->limit()) ++over;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(over == 0);
  CHECK(budget->in_use() == 0);
}
