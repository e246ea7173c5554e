#pragma once
// ring_queue: a FIFO of trivially copyable records in one circular array that doubles when full.
// The rdma send path keeps three such queues (ring entries, committed and posted messages) and
// touches each a few times per message; std::deque's block bookkeeping cost several times what a
// masked index does, and in steady state this never allocates. It never shrinks either: a burst
// (a long credit stall) keeps its array until the owner goes. front(), operator[] and pop_front()
// need a record there, as with std::deque.
// Layer: transport. Threading: none of its own (its owner's executor).

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

namespace rdmarpc::transport {

template <typename T>
class ring_queue {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "ring_queue moves its records with plain copies");

 public:
  ring_queue() = default;
  // A moved-from queue is empty and usable.
  ring_queue(ring_queue&& other) noexcept
      : slots_(std::move(other.slots_)),
        mask_(std::exchange(other.mask_, 0)),
        head_(std::exchange(other.head_, 0)),
        size_(std::exchange(other.size_, 0)) {}
  ring_queue& operator=(ring_queue&& other) noexcept {
    slots_ = std::move(other.slots_);
    mask_ = std::exchange(other.mask_, 0);
    head_ = std::exchange(other.head_, 0);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }

  // Index 0 is the oldest record.
  T& operator[](std::size_t i) noexcept { return slots_[(head_ + i) & mask_]; }
  const T& operator[](std::size_t i) const noexcept { return slots_[(head_ + i) & mask_]; }
  T& front() noexcept { return slots_[head_]; }
  const T& front() const noexcept { return slots_[head_]; }

  void push_back(const T& value) {
    if (size_ == capacity()) grow();
    slots_[(head_ + size_) & mask_] = value;
    ++size_;
  }
  void pop_front() noexcept {
    head_ = (head_ + 1) & mask_;
    --size_;
  }
  void clear() noexcept {
    head_ = 0;
    size_ = 0;
  }

  template <typename F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < size_; ++i) f((*this)[i]);
  }

 private:
  std::size_t capacity() const noexcept { return slots_ ? mask_ + 1 : 0; }

  void grow() {
    const std::size_t old_capacity = capacity();
    const std::size_t new_capacity = old_capacity == 0 ? 16 : old_capacity * 2;
    auto grown = std::make_unique_for_overwrite<T[]>(new_capacity);
    for (std::size_t i = 0; i < size_; ++i) grown[i] = (*this)[i];
    slots_ = std::move(grown);
    mask_ = new_capacity - 1;
    head_ = 0;
  }

  std::unique_ptr<T[]> slots_;
  std::size_t mask_ = 0;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace rdmarpc::transport
