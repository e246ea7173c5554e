#pragma once
// heap_send_queue: the reservations and byte accounting of a connection whose messages live in
// ordinary heap buffers (tcp, loopback). A reservation is a buffer with `headroom` bytes in front
// for the transport's own header; committed buffers are handed to the transport, which gives
// their bytes back with written() once they left its queue. Buffers are recycled: a steady stream
// of messages allocates nothing. Layer: transport. Threading: the owning connection's executor.

#include "transport/send_reservation.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmarpc::transport {

class heap_send_queue {
 public:
  using buffer = std::vector<std::byte>;

  heap_send_queue(std::size_t headroom, std::size_t limit_bytes) noexcept
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
  std::size_t queued_ = 0;          // reserved or taken, not yet written
  std::vector<slot> slots_;         // outstanding reservations, indexed by token
  std::vector<std::uint32_t> free_slots_;
  std::vector<buffer> spare_;       // recycled buffers
};

}  // namespace rdmarpc::transport
