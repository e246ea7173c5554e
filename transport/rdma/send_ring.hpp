#pragma once
// send_ring: allocation of contiguous message space in one registered send region, as a ring.
// Every allocation is contiguous (a message that would wrap skips the region's tail instead), so
// a message is serialized in one piece and its fragments are consecutive slices of it. Space comes
// back in allocation order: an entry released early (a cancelled reservation, or a message whose
// send completed) frees its space once every older entry is released too.
// Pure arithmetic, no verbs. Layer: transport (rdma). Threading: its connection's executor.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "transport/ring_queue.hpp"

namespace rdmarpc::transport::rdma {

class send_ring {
 public:
  static constexpr std::size_t kAlignment = 64;  // entries start on cache lines
  // The ring space an entry of `bytes` takes.
  static constexpr std::size_t footprint(std::size_t bytes) noexcept {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

  explicit send_ring(std::size_t capacity) noexcept : capacity_(capacity / kAlignment * kAlignment) {}

  struct allocation {
    std::uint64_t id;    // pass to release()
    std::size_t offset;  // where the bytes start in the region
  };

  // Room for `bytes` contiguous bytes now, or nothing (try again after a release). Zero bytes
  // take no space but still make an entry.
  [[gnu::always_inline]] std::optional<allocation> allocate(std::size_t bytes) noexcept;
  // Entry `id` is no longer needed. Its space (and that of every released entry behind it) is
  // free once all older entries are released.
  void release(std::uint64_t id) noexcept;
  // Where live entry `id` starts.
  std::size_t offset_of(std::uint64_t id) const noexcept { return entries_[id - front_id_].offset; }

  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t used() const noexcept { return used_; }  // including skipped tails and padding
  std::size_t entries() const noexcept { return entries_.size(); }

 private:
  struct entry {
    std::size_t offset;
    std::size_t end;   // offset just behind the entry's bytes
    std::size_t span;  // bytes it holds, counting the skipped tail before it
    bool released;
  };

  std::size_t capacity_;
  std::size_t head_ = 0;  // next free offset
  std::size_t tail_ = 0;  // start of the oldest live entry's span
  std::size_t used_ = 0;
  std::uint64_t front_id_ = 0;  // id of entries_.front()
  ring_queue<entry> entries_;
};

// Inline: both run for every message sent (reserve, then the send's completion).
inline std::optional<send_ring::allocation> send_ring::allocate(std::size_t bytes) noexcept {
  const std::size_t length = footprint(bytes);
  // Empty: start over at the front, the most contiguous room. Not while zero-byte entries are
  // live: releasing one moves tail_ to where it was made.
  if (entries_.empty()) head_ = tail_ = 0;
  std::size_t offset = 0, span = 0;
  if (used_ == 0 || head_ > tail_ || (head_ == tail_ && used_ < capacity_)) {
    // Used space is [tail_, head_): free are [head_, capacity_) and [0, tail_).
    if (capacity_ - head_ >= length) {
      offset = head_;
      span = length;
    } else if (tail_ >= length) {
      offset = 0;
      span = capacity_ - head_ + length;  // the tail behind head_ is skipped
    } else {
      return std::nullopt;
    }
  } else {
    // Wrapped: free is [head_, tail_).
    if (tail_ - head_ < length) return std::nullopt;
    offset = head_;
    span = length;
  }
  head_ = offset + length;
  used_ += span;
  entries_.push_back(entry{offset, head_, span, false});
  return allocation{front_id_ + entries_.size() - 1, offset};
}

inline void send_ring::release(std::uint64_t id) noexcept {
  if (id < front_id_ || id - front_id_ >= entries_.size()) return;
  entries_[id - front_id_].released = true;
  while (!entries_.empty() && entries_.front().released) {
    tail_ = entries_.front().end;
    used_ -= entries_.front().span;
    entries_.pop_front();
    ++front_id_;
  }
}

}  // namespace rdmarpc::transport::rdma
