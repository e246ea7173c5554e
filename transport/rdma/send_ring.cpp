#include "transport/rdma/send_ring.hpp"

namespace rdmarpc::transport::rdma {

std::optional<send_ring::allocation> send_ring::allocate(std::size_t bytes) noexcept {
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

void send_ring::release(std::uint64_t id) noexcept {
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
