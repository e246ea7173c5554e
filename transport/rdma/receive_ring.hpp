#pragma once
// receive_ring: the bookkeeping of an rdma connection's pre-posted receive ring: how many slots
// sit on the receive queue, which released slots wait to go back, and when a batch of them is due
// (reposts go out as one chained ibv_post_recv). The posting itself is the caller's. Pure: no
// verbs. Layer: transport (rdma). Threading: used on its connection's executor only.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rdmarpc::transport::rdma {

class receive_ring {
 public:
  // Released slots wait for the end of the current handler run, or for this many, then go back
  // in one post.
  static constexpr std::size_t kRepostBatch = 32;

  // The whole ring (`depth` slots) is posted before the connection exists.
  explicit receive_ring(std::uint32_t depth) : posted_(depth) { pending_.reserve(depth); }

  // Slots on the receive queue now (each is a credit the peer may use).
  std::uint32_t posted() const noexcept { return posted_; }
  // A receive completed: its slot left the queue.
  void on_completion() noexcept {
    if (posted_ > 0) --posted_;
  }
  // `slot` is free again (its message was consumed or dropped): it waits to be reposted.
  void release(std::uint32_t slot) { pending_.push_back(slot); }

  bool has_pending() const noexcept { return !pending_.empty(); }
  bool batch_due() const noexcept { return pending_.size() >= kRepostBatch; }
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
  std::uint32_t posted_;
  std::vector<std::uint32_t> pending_;
};

}  // namespace rdmarpc::transport::rdma
