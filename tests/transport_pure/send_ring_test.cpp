// Unit tests of the rdma send ring's allocator (transport/rdma/send_ring.hpp): contiguous
// allocations, wrap-around by skipping the tail, release in allocation order, and a randomized
// run against a byte-level model that no two live allocations ever overlap.
#include "transport/rdma/send_ring.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

using rdmarpc::transport::rdma::send_ring;

TEST_CASE("send_ring: allocations are contiguous - aligned - in order", "[send_ring]") {
  send_ring ring(1024);
  const auto a = ring.allocate(100);
  const auto b = ring.allocate(1);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->offset == 0);
  CHECK(b->offset == 128);  // 100 rounded up to the 64-byte alignment
  CHECK(b->id == a->id + 1);
  CHECK(ring.used() == 192);
  CHECK(ring.offset_of(b->id) == 128);
}

TEST_CASE("send_ring: full until the oldest entry is released - later releases wait for it", "[send_ring]") {
  send_ring ring(256);
  const auto a = ring.allocate(128);
  const auto b = ring.allocate(128);
  REQUIRE(a);
  REQUIRE(b);
  CHECK_FALSE(ring.allocate(1));
  ring.release(b->id);  // not the oldest: nothing comes back yet
  CHECK(ring.used() == 256);
  CHECK_FALSE(ring.allocate(1));
  ring.release(a->id);  // now both
  CHECK(ring.used() == 0);
  CHECK(ring.entries() == 0);
  const auto c = ring.allocate(256);
  REQUIRE(c);
  CHECK(c->offset == 0);  // an empty ring starts over at the front
}

TEST_CASE("send_ring: a message that would wrap skips the tail and starts at the front", "[send_ring]") {
  send_ring ring(512);
  const auto a = ring.allocate(192);  // [0, 192)
  const auto b = ring.allocate(192);  // [192, 384)
  REQUIRE(a);
  REQUIRE(b);
  ring.release(a->id);                // free: [384, 512) and [0, 192)
  CHECK_FALSE(ring.allocate(256));    // neither piece is large enough
  const auto c = ring.allocate(192);  // the tail (128 bytes) is too small: skipped
  REQUIRE(c);
  CHECK(c->offset == 0);
  CHECK(ring.used() == 192 + 128 + 192);
  CHECK_FALSE(ring.allocate(1));  // wrapped: free is [192, 192)
  ring.release(b->id);            // frees b; the skipped tail belongs to c
  CHECK(ring.used() == 128 + 192);
  CHECK_FALSE(ring.allocate(193));  // free is [192, 384)
  const auto d = ring.allocate(192);
  REQUIRE(d);
  CHECK(d->offset == 192);
  ring.release(c->id);  // frees c and the tail it skipped
  CHECK(ring.used() == 192);
}

TEST_CASE("send_ring: zero-byte entries take no space but keep their place", "[send_ring]") {
  send_ring ring(128);
  const auto a = ring.allocate(128);
  const auto z = ring.allocate(0);
  REQUIRE(a);
  REQUIRE(z);  // even with the ring full
  ring.release(z->id);
  CHECK(ring.entries() == 2);  // waits for a
  ring.release(a->id);
  CHECK(ring.entries() == 0);
}

TEST_CASE("send_ring: a live zero-byte entry keeps the ring from starting over under a new entry",
          "[send_ring]") {
  send_ring ring(1024);
  const auto a = ring.allocate(100);  // [0, 128)
  const auto z = ring.allocate(0);    // a large message's place holder, at 128
  REQUIRE(a);
  REQUIRE(z);
  ring.release(a->id);  // the oldest: freed; z is still live
  CHECK(ring.used() == 0);
  const auto b = ring.allocate(640);  // must not start over at 0 while z's release moves tail_
  REQUIRE(b);
  ring.release(z->id);
  // Fill the rest: nothing may overlap b.
  std::vector<std::uint64_t> ids;
  while (const auto c = ring.allocate(64)) {
    CHECK((c->offset + 64 <= b->offset || c->offset >= b->offset + 640));
    ids.push_back(c->id);
    if (ids.size() > 32) break;
  }
  CHECK(ids.size() < 32);
}

TEST_CASE("send_ring: random allocate/release never overlaps live entries", "[send_ring]") {
  constexpr std::size_t kCapacity = 4096;
  send_ring ring(kCapacity);
  std::mt19937 rng(42);
  struct live {
    std::uint64_t id;
    std::size_t offset, size;
  };
  std::deque<live> entries;
  std::vector<int> owner(kCapacity, 0);
  std::size_t allocated = 0, refused = 0, overlaps = 0;
  for (int step = 0; step < 200000; ++step) {
    if (rng() % 2 == 0) {
      const std::size_t size = rng() % 1100;
      if (const auto a = ring.allocate(size)) {
        if (a->offset + size > kCapacity) ++overlaps;
        for (std::size_t i = a->offset; i < a->offset + size && i < kCapacity; ++i)
          overlaps += owner[i]++ != 0;
        entries.push_back({a->id, a->offset, size});
        ++allocated;
      } else {
        ++refused;
        // Refusal is honest: with nothing live the ring takes anything up to its capacity.
        if (ring.used() == 0) ++overlaps;
      }
    } else if (!entries.empty()) {
      // Release a random live entry (out of order, like a cancelled reservation).
      const std::size_t k = rng() % entries.size();
      for (std::size_t i = entries[k].offset; i < entries[k].offset + entries[k].size; ++i) --owner[i];
      ring.release(entries[k].id);
      entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(k));
    }
    if (ring.used() > ring.capacity()) ++overlaps;
  }
  CHECK(overlaps == 0);
  CHECK(allocated > 10000);
  CHECK(refused > 0);
  for (const auto& e : entries) ring.release(e.id);
  CHECK(ring.used() == 0);
}
