// Unit tests of message_buffers and message_queue (transport/message_buffers.hpp), the memory of
// tcp's and loopback's messages: reservations counted against the byte limit until written,
// buffers recycled between sending and receiving, and the send queue linked through the blocks.
#include "transport/message_buffers.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

using rdmarpc::transport::message_block;
using rdmarpc::transport::message_buffers;
using rdmarpc::transport::message_queue;
using rdmarpc::transport::send_reservation;

namespace {

// Records what commit() and cancel() of a reservation hand back, as a connection would get them.
struct recording_owner : send_reservation::owner {
  struct commit {
    std::uint64_t token;
    std::size_t size;
  };
  std::vector<commit> commits;
  std::vector<std::uint64_t> cancels;
  void commit_reservation(std::uint64_t token, std::size_t size, bool) noexcept override {
    commits.push_back({token, size});
  }
  void cancel_reservation(std::uint64_t token) noexcept override { cancels.push_back(token); }
};

// The blocks queued, walked through their links.
std::size_t length(const message_queue& q) {
  std::size_t n = 0;
  for (const message_block* b = q.first(); b != nullptr; b = b->next) ++n;
  return n;
}

message_buffers::buffer block_of(std::size_t size) {
  auto b = std::make_unique<message_block>();
  b->resize(size);
  return b;
}

}  // namespace

TEST_CASE("message_buffers: a reservation counts against the limit until its bytes are written",
          "[message_buffers]") {
  recording_owner owner;
  message_buffers buffers(4, 100);  // 4 bytes of headroom (tcp's length), 100 queued at most
  CHECK(buffers.has_room(1000));    // nothing queued: any size fits
  auto r = buffers.reserve(&owner, 60);
  REQUIRE(r.size() == 60);
  CHECK(buffers.queued_bytes() == 60);
  CHECK(buffers.has_room(40));
  CHECK_FALSE(buffers.has_room(41));

  std::memset(r.data().data(), 0x5a, r.size());
  r.commit(50);  // only 50 of the 60 bytes used
  REQUIRE(owner.commits.size() == 1);
  auto taken = buffers.take(owner.commits[0].token, owner.commits[0].size);
  CHECK(taken->size == 4 + 50);                // headroom + message
  CHECK(buffers.queued_bytes() == 50);         // the unused 10 came back at take
  CHECK(taken->data()[4] == std::byte{0x5a});  // the bytes written behind the headroom, not moved
  buffers.written(50);
  CHECK(buffers.queued_bytes() == 0);
}

TEST_CASE("message_buffers: a cancelled reservation gives its room back", "[message_buffers]") {
  recording_owner owner;
  message_buffers buffers(0, 100);
  {
    auto r = buffers.reserve(&owner, 80);
    CHECK(buffers.queued_bytes() == 80);
  }  // dropped without commit: the owner's cancel_reservation
  REQUIRE(owner.cancels.size() == 1);
  buffers.cancel(owner.cancels[0]);
  CHECK(buffers.queued_bytes() == 0);
  CHECK(owner.commits.empty());
}

TEST_CASE("message_buffers: buffers are recycled - a steady stream allocates nothing new",
          "[message_buffers]") {
  recording_owner owner;
  message_buffers buffers(4, 1 << 20);
  auto first = buffers.reserve(&owner, 64);
  first.commit();
  auto block = buffers.take(owner.commits[0].token, 64);
  const message_block* address = block.get();
  buffers.written(64);
  buffers.recycle(std::move(block));
  // The same block serves the next reservation of a size it holds, and a received message.
  auto second = buffers.reserve(&owner, 32);
  second.commit();
  CHECK(owner.commits[1].token == reinterpret_cast<std::uintptr_t>(address));
  auto again = buffers.take(owner.commits[1].token, 32);
  buffers.written(32);
  const std::uint64_t lent = message_buffers::lend(std::move(again));
  CHECK(message_buffers::lent(lent).size() == 4 + 32);
  buffers.give_back(lent);
  auto spare = buffers.take_spare(10);
  CHECK(spare.get() == address);
  CHECK(spare->size == 10);
}

TEST_CASE("message_queue: first in, first out, linked through the blocks", "[message_buffers]") {
  message_queue q;
  CHECK(q.empty());
  CHECK_FALSE(q.has_one());
  std::vector<const message_block*> pushed;
  for (std::size_t size = 1; size <= 3; ++size) {
    auto b = block_of(size);
    pushed.push_back(b.get());
    q.push_back(std::move(b));
    CHECK(length(q) == size);
    CHECK(q.has_one() == (size == 1));
  }
  std::vector<const message_block*> walked;
  for (const message_block* b = q.first(); b != nullptr; b = b->next) walked.push_back(b);
  CHECK(walked == pushed);
  CHECK(q.front().size == 1);

  auto popped = q.pop_front();
  CHECK(popped.get() == pushed[0]);
  CHECK(popped->next == nullptr);  // unlinked: a recycled block carries no stale link
  CHECK(q.front().size == 2);
  q.push_back(std::move(popped));  // the tail again, after the others
  CHECK(q.pop_front()->size == 2);
  CHECK(q.pop_front()->size == 3);
  CHECK(q.has_one());
  CHECK(q.pop_front()->size == 1);
  CHECK(q.empty());
  CHECK(q.first() == nullptr);

  q.push_back(block_of(7));  // usable once emptied; clear() frees what it holds
  q.push_back(block_of(8));
  q.clear();
  CHECK(q.empty());
  CHECK(length(q) == 0);
  q.push_back(block_of(9));  // (the destructor frees this one: ASan would see a leak)
  CHECK(q.has_one());
}
