#pragma once
// receive_ring: the bookkeeping of an rdma connection's pre-posted receive ring: how many slots
// sit on the receive queue, which released slots wait to go back, and when they are due (reposts
// go out as one chained ibv_post_recv). The posting itself is the caller's. Pure: no verbs.
// Layer: transport (rdma). Threading: used on its connection's executor only.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rdmarpc::transport::rdma {

class receive_ring {
 public:
  // Released slots go back in batches of depth / 8, at most this many (and at least one).
  static constexpr std::uint32_t kMaxRepostBatch = 16;

  // The whole ring (`depth` slots) is posted before the connection exists.
  explicit receive_ring(std::uint32_t depth)
      : depth_(depth), batch_(std::clamp<std::uint32_t>(depth / 8, 1, kMaxRepostBatch)), posted_(depth) {
    pending_.reserve(depth);
  }

  // Slots on the receive queue now (each is a credit the peer may use).
  std::uint32_t posted() const noexcept { return posted_; }
  // A receive completed: its slot left the queue.
  void on_completion() noexcept {
    if (posted_ > 0) --posted_;
  }
  // `slot` is free again (its message was consumed or dropped): it waits to be reposted.
  void release(std::uint32_t slot) { pending_.push_back(slot); }

  bool has_pending() const noexcept { return !pending_.empty(); }
  // Whether the released slots should go back now: a batch of them waits, or the receive queue is
  // down to half the ring. Until then the peer still has more than half the ring to send into, so
  // holding a few slots back never stalls it, and one post (one doorbell) serves a batch instead
  // of each message.
  bool repost_due() const noexcept { return batch_waiting() || posted_ <= depth_ / 2; }
  // A whole batch waits (as opposed to due only because the queue is down to half the ring).
  bool batch_waiting() const noexcept { return pending_.size() >= batch_; }
  std::uint32_t repost_batch() const noexcept { return batch_; }
  std::span<const std::uint32_t> pending() const noexcept { return pending_; }

  // The pending slots were posted; returns how many.
  std::uint32_t mark_posted() noexcept {
    const auto n = static_cast<std::uint32_t>(pending_.size());
    posted_ += n;
    pending_.clear();
    return n;
  }
  // The pending slots will never be posted (the QP is going away).
  void drop_pending() noexcept { pending_.clear(); }

 private:
  std::uint32_t depth_;
  std::uint32_t batch_;
  std::uint32_t posted_;
  std::vector<std::uint32_t> pending_;
};

}  // namespace rdmarpc::transport::rdma
