#pragma once
// send_reservation: room for one outgoing message in memory its connection owns (registered send
// memory on rdma, a frame buffer behind the length header on tcp, a message buffer on loopback).
// The sender writes the message straight into data() and commits it: no copy between the caller's
// serializer and the wire. Dropping a reservation without commit() gives the room back.
// Layer: transport. Threading: write, commit and drop it on its connection's executor, and before
// the connection is destroyed (the connection hands out raw references to its own memory).

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace rdmarpc::transport {

class send_reservation {
 public:
  // Implemented by connections: what commit() and dropping do with the room.
  class owner {
   public:
    // The first `size` bytes of reservation `token` are a message: send it after every message
    // committed before it. If the connection ended meanwhile it drops the message. `coalesce`:
    // more messages are likely to follow from the same sender (commit_coalesced).
    virtual void commit_reservation(std::uint64_t token, std::size_t size, bool coalesce) noexcept = 0;
    // Reservation `token` is given up: its room is free again.
    virtual void cancel_reservation(std::uint64_t token) noexcept = 0;

   protected:
    ~owner() = default;
  };

  send_reservation() noexcept = default;
  send_reservation(owner* o, std::uint64_t token, std::span<std::byte> data) noexcept
      : owner_(o), token_(token), data_(data) {}
  send_reservation(send_reservation&& other) noexcept
      : owner_(std::exchange(other.owner_, nullptr)),
        token_(other.token_),
        data_(std::exchange(other.data_, {})) {}
  send_reservation& operator=(send_reservation&& other) noexcept {
    if (this != &other) {
      cancel();
      owner_ = std::exchange(other.owner_, nullptr);
      token_ = other.token_;
      data_ = std::exchange(other.data_, {});
    }
    return *this;
  }
  send_reservation(const send_reservation&) = delete;
  send_reservation& operator=(const send_reservation&) = delete;
  ~send_reservation() {
    if (owner_ != nullptr) cancel();  // committed (the usual case): only this check, never a call
  }

  // Exactly the bytes asked for, contiguous and writable until commit() or cancel().
  std::span<std::byte> data() const noexcept { return data_; }
  std::size_t size() const noexcept { return data_.size(); }
  explicit operator bool() const noexcept { return owner_ != nullptr; }

  // Sends the whole reservation, or only its first `used` bytes (used <= size()). Empty afterwards.
  void commit() noexcept { commit(data_.size()); }
  void commit(std::size_t used) noexcept { finish(used, false); }
  // The same for a sender that is likely to commit more messages at once (a stream writing
  // ahead): the connection may hold the message back for a few turns of its io_context while that
  // sender keeps committing, then send them together (one write or one chained post instead of
  // one each). See connection::hold_doorbell for the bound.
  void commit_coalesced(std::size_t used) noexcept { finish(used, true); }
  // Gives the room back without sending anything. Idempotent; the destructor does it too.
  void cancel() noexcept {
    if (owner_ == nullptr) return;
    auto* o = std::exchange(owner_, nullptr);
    data_ = {};
    o->cancel_reservation(token_);
  }

 private:
  void finish(std::size_t used, bool coalesce) noexcept {
    if (owner_ == nullptr) return;
    auto* o = std::exchange(owner_, nullptr);
    if (used > data_.size()) used = data_.size();
    data_ = {};
    o->commit_reservation(token_, used, coalesce);
  }

  owner* owner_ = nullptr;
  std::uint64_t token_ = 0;
  std::span<std::byte> data_;
};

}  // namespace rdmarpc::transport
