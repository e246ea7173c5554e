#pragma once
// message_buffers: the heap buffers of a connection whose messages live in ordinary memory (tcp,
// loopback), sending and receiving. Sending: a reservation is a buffer with `headroom` bytes in
// front for the transport's own header; committed buffers go to the transport, which gives their
// bytes back with written() once they left its queue (the send queue's byte bound). Receiving: a
// received message's buffer is lent to the rpc layer (lend) and comes back on release. Buffers
// circulate between both: a steady stream of messages allocates nothing.
// Layer: transport. Threading: the owning connection's executor.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/send_reservation.hpp"

namespace rdmarpc::transport {

class message_buffers {
 public:
  using buffer = std::vector<std::byte>;

  message_buffers(std::size_t headroom, std::size_t limit_bytes) noexcept
      : headroom_(headroom), limit_(limit_bytes) {}

  // Whether `bytes` more fit under the limit (always, while nothing is queued).
  bool has_room(std::size_t bytes) const noexcept { return queued_ == 0 || queued_ + bytes <= limit_; }

  // A reservation of `bytes` (the caller checked has_room), owned by `owner`.
  send_reservation reserve(send_reservation::owner* owner, std::size_t bytes);

  // commit_reservation: the buffer of `token`, holding headroom + `size` bytes. Its bytes stay
  // counted until written().
  buffer take(std::uint64_t token, std::size_t size);
  // cancel_reservation: the room of `token` is free again.
  void cancel(std::uint64_t token) noexcept;
  // `size` message bytes of a taken buffer left the queue (written, or handed to the peer).
  void written(std::size_t size) noexcept { queued_ -= size < queued_ ? size : queued_; }
  // A buffer that is no longer needed, kept for the next reservation unless it is huge.
  void recycle(buffer b) noexcept;
  // Forgets every queued byte (the connection ended and dropped its queue).
  void clear() noexcept { queued_ = 0; }

  // A buffer of `size` bytes for a received message (recycled when one is spare).
  buffer take_spare(std::size_t size);
  // Lends `b` (a received message) to the rpc layer: the message's owner token, and its bytes.
  std::uint64_t lend(buffer b);
  std::span<const std::byte> lent(std::uint64_t token) const noexcept {
    return {lent_[token].data(), lent_[token].size()};
  }
  // The message was released: its buffer serves the next message.
  void give_back(std::uint64_t token) noexcept;

  std::size_t queued_bytes() const noexcept { return queued_; }
  std::size_t headroom() const noexcept { return headroom_; }

 private:
  struct slot {
    buffer data;
    std::size_t bytes = 0;
    bool used = false;
  };

  std::size_t headroom_;
  std::size_t limit_;
  std::size_t queued_ = 0;   // reserved or taken, not yet written
  std::vector<slot> slots_;  // outstanding reservations, indexed by token
  std::vector<std::uint32_t> free_slots_;
  std::vector<buffer> spare_;  // recycled buffers
  std::vector<buffer> lent_;   // received messages the rpc layer holds, indexed by token
  std::vector<std::uint32_t> free_lent_;
};

}  // namespace rdmarpc::transport
