#pragma once
// message_buffers: the heap buffers of a connection whose messages live in ordinary memory (tcp,
// loopback), sending and receiving. Sending: a reservation is a buffer with `headroom` bytes in
// front for the transport's own header; committed buffers go to the transport, which gives their
// bytes back with written() once they left its queue (the send queue's byte bound). Receiving: a
// received message's buffer is lent to the rpc layer (lend) and comes back on release. Buffers
// circulate between both: a steady stream of messages allocates nothing. A buffer moves by
// pointer (the reservation's and the lent message's token is its address), never copied.
// Layer: transport. Threading: the owning connection's executor.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "transport/send_reservation.hpp"

namespace rdmarpc::transport {

// One message's memory, from reservation to the send queue (or the peer) to the receiver and
// back to a spare list.
struct message_block {
  std::size_t size = 0;           // headroom + message
  std::size_t counted = 0;        // bytes of a reservation counted in the queue until written
  message_block* next = nullptr;  // the one behind it in a message_queue

  std::byte* data() noexcept { return storage.data(); }
  const std::byte* data() const noexcept { return storage.data(); }
  std::span<std::byte> bytes() noexcept { return {storage.data(), size}; }
  std::span<const std::byte> bytes() const noexcept { return {storage.data(), size}; }
  // Sizes the block for `n` bytes. The storage never shrinks, so a recycled block takes any
  // message up to the largest it held without writing a byte (messages of alternating sizes, a
  // request and its reply, would otherwise zero-fill the difference each time).
  void resize(std::size_t n) {
    if (n > storage.size()) storage.resize(n);
    size = n;
  }
  std::size_t capacity() const noexcept { return storage.capacity(); }

  std::vector<std::byte> storage;  // at least `size` bytes
};

class message_buffers {
 public:
  using buffer = std::unique_ptr<message_block>;

  message_buffers(std::size_t headroom, std::size_t limit_bytes);

  // Whether `bytes` more fit under the limit (always, while nothing is queued).
  bool has_room(std::size_t bytes) const noexcept { return queued_ == 0 || queued_ + bytes <= limit_; }

  // A reservation of `bytes` (the caller checked has_room), owned by `owner`. Inline: the usual
  // case takes a spare buffer that is large enough already.
  send_reservation reserve(send_reservation::owner* owner, std::size_t bytes) {
    const std::size_t size = headroom_ + bytes;
    if (spares_ == 0 || spare_[spares_ - 1]->storage.size() < size) [[unlikely]]
      return reserve_grown(owner, bytes);
    message_block* b = spare_[--spares_].release();
    b->size = size;
    return reserved(owner, b, bytes);
  }

  // commit_reservation: the buffer of `token`, holding headroom + `size` bytes (at most what was
  // reserved: nothing moves). Its bytes stay counted until written().
  buffer take(std::uint64_t token, std::size_t size) noexcept {
    buffer b(reinterpret_cast<message_block*>(token));
    b->size = headroom_ + size;
    if (b->counted != size) written(b->counted - size);  // clamped: after clear() nothing is counted
    b->counted = 0;
    return b;
  }
  // cancel_reservation: the room of `token` is free again.
  void cancel(std::uint64_t token) noexcept;
  // `size` message bytes of a taken buffer left the queue (written, or handed to the peer).
  void written(std::size_t size) noexcept { queued_ -= size < queued_ ? size : queued_; }
  // A buffer that is no longer needed, kept for the next reservation unless it is huge.
  [[gnu::always_inline]] void recycle(buffer b) noexcept {
    if (spares_ < kSpareBuffers && b->capacity() <= kSpareBufferBytes) [[likely]] {
      spare_[spares_++] = std::move(b);
      return;
    }
    free(std::move(b));
  }
  // Forgets every queued byte (the connection ended and dropped its queue).
  void clear() noexcept { queued_ = 0; }

  // A buffer of `size` bytes for a received message (recycled when one is spare).
  buffer take_spare(std::size_t size);
  // The same holding `bytes` (a large frame read into its own memory).
  buffer wrap(std::vector<std::byte> bytes);
  // Lends `b` (a received message) to the rpc layer: the message's owner token, and its bytes.
  // (A token is an address: bit 0 is clear, which tcp uses to tell its own read buffers' apart.)
  static std::uint64_t lend(buffer b) noexcept { return reinterpret_cast<std::uintptr_t>(b.release()); }
  static std::span<const std::byte> lent(std::uint64_t token) noexcept {
    return reinterpret_cast<const message_block*>(token)->bytes();
  }
  // The message was released: its buffer serves the next message.
  void give_back(std::uint64_t token) noexcept { recycle(buffer(reinterpret_cast<message_block*>(token))); }

  std::size_t queued_bytes() const noexcept { return queued_; }
  std::size_t headroom() const noexcept { return headroom_; }

 private:
  static constexpr std::size_t kSpareBuffers = 16;              // recycled buffers kept
  static constexpr std::size_t kSpareBufferBytes = 256 * 1024;  // ... none larger than this

  buffer spare_or_new() {
    if (spares_ == 0) return std::make_unique<message_block>();
    return std::move(spare_[--spares_]);
  }
  // reserve() when no spare buffer is large enough: a spare grown, or a new one.
  send_reservation reserve_grown(send_reservation::owner* owner, std::size_t bytes);
  // Frees a buffer recycle() does not keep (out of line: recycle runs for every message).
  static void free(buffer b) noexcept;
  send_reservation reserved(send_reservation::owner* owner, message_block* b, std::size_t bytes) noexcept {
    b->counted = bytes;
    queued_ += bytes;
    return send_reservation(owner, reinterpret_cast<std::uintptr_t>(b),
                            std::span(b->data() + headroom_, bytes));
  }

  std::size_t headroom_;
  std::size_t limit_;
  std::size_t queued_ = 0;                   // reserved or taken, not yet written
  std::array<buffer, kSpareBuffers> spare_;  // recycled buffers: the first spares_
  std::size_t spares_ = 0;
};

// A FIFO of message buffers, linked through the blocks themselves: pushing and popping touch two
// pointers and never allocate (a connection's send queue, one push and one pop per message).
class message_queue {
 public:
  message_queue() noexcept = default;
  message_queue(const message_queue&) = delete;
  message_queue& operator=(const message_queue&) = delete;
  ~message_queue() { clear(); }

  bool empty() const noexcept { return head_ == nullptr; }
  bool has_one() const noexcept { return head_ != nullptr && head_ == tail_; }
  message_block& front() noexcept { return *head_; }
  // The first block, to walk the queue through `next` (gathered writes).
  const message_block* first() const noexcept { return head_; }

  void push_back(message_buffers::buffer b) noexcept {
    message_block* block = b.release();
    block->next = nullptr;
    (tail_ != nullptr ? tail_->next : head_) = block;
    tail_ = block;
  }
  message_buffers::buffer pop_front() noexcept {
    message_block* block = head_;
    head_ = block->next;
    if (head_ == nullptr) tail_ = nullptr;
    block->next = nullptr;
    return message_buffers::buffer(block);
  }
  void clear() noexcept {
    while (!empty()) pop_front();
  }

 private:
  message_block* head_ = nullptr;
  message_block* tail_ = nullptr;
};

}  // namespace rdmarpc::transport
