// receive_ring without verbs: posted slots as receives complete and reposts go out, batching.
#include "transport/rdma/receive_ring.hpp"

#include <catch2/catch.hpp>
#include <vector>

using rdmarpc::transport::rdma::receive_ring;

TEST_CASE("receive ring: completions take slots off the queue and reposts put them back") {
  receive_ring ring(4);
  CHECK(ring.posted() == 4);
  CHECK_FALSE(ring.has_pending());
  ring.on_completion();
  ring.on_completion();
  CHECK(ring.posted() == 2);
  ring.release(3);
  ring.release(1);
  CHECK(ring.has_pending());
  CHECK(std::vector<std::uint32_t>(ring.pending().begin(), ring.pending().end()) ==
        std::vector<std::uint32_t>{3, 1});
  CHECK(ring.mark_posted() == 2);
  CHECK(ring.posted() == 4);
  CHECK_FALSE(ring.has_pending());
  CHECK(ring.mark_posted() == 0);
}

TEST_CASE("receive ring: released slots are due once a batch (depth / 8) of them waits") {
  receive_ring ring(64);
  REQUIRE(ring.repost_batch() == 8);
  for (std::uint32_t i = 0; i < ring.repost_batch(); ++i) {
    ring.on_completion();
    CHECK_FALSE(ring.repost_due());  // the queue still holds more than half the ring
    ring.release(i);
  }
  CHECK(ring.repost_due());
  CHECK(ring.batch_waiting());
  CHECK(ring.mark_posted() == 8);
  CHECK_FALSE(ring.repost_due());
  CHECK(ring.posted() == 64);
}

TEST_CASE("receive ring: a single released slot is due once the queue is down to half the ring") {
  receive_ring ring(64);
  // 31 received and held: 33 slots stay posted, and one released slot is not due yet.
  for (std::uint32_t i = 0; i < 31; ++i) ring.on_completion();
  ring.release(0);
  CHECK(ring.posted() == 33);
  CHECK_FALSE(ring.repost_due());
  CHECK_FALSE(ring.batch_waiting());
  // One more received: 32 = 64 / 2 posted, and the released slot is due (the peer must not run
  // short of slots we sit on), though no batch waits.
  ring.on_completion();
  CHECK(ring.posted() == 32);
  CHECK(ring.repost_due());
  CHECK_FALSE(ring.batch_waiting());
  CHECK(ring.mark_posted() == 1);
  CHECK(ring.posted() == 33);
}

TEST_CASE("receive ring: the batch is at least one slot and at most kMaxRepostBatch") {
  CHECK(receive_ring(4).repost_batch() == 1);  // the smallest ring reposts every slot at once
  CHECK(receive_ring(1024).repost_batch() == receive_ring::kMaxRepostBatch);
  receive_ring small(4);
  small.on_completion();
  small.release(0);
  CHECK(small.repost_due());
}

TEST_CASE("receive ring: dropped reposts are never counted as posted") {
  receive_ring ring(2);
  ring.on_completion();
  ring.on_completion();
  ring.release(0);
  ring.drop_pending();
  CHECK_FALSE(ring.has_pending());
  CHECK(ring.posted() == 0);
  ring.on_completion();  // a flushed completion after the drop does not wrap around
  CHECK(ring.posted() == 0);
}
