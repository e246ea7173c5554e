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

TEST_CASE("receive ring: a batch is due after kRepostBatch released slots") {
  receive_ring ring(64);
  for (std::uint32_t i = 0; i < receive_ring::kRepostBatch; ++i) {
    ring.on_completion();
    CHECK_FALSE(ring.batch_due());
    ring.release(i);
  }
  CHECK(ring.batch_due());
  CHECK(ring.mark_posted() == receive_ring::kRepostBatch);
  CHECK_FALSE(ring.batch_due());
  CHECK(ring.posted() == 64);
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
