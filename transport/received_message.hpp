#pragma once
// A message delivered by a transport::connection, readable in place (zero copy on rdma: the bytes
// live in the receive ring) until it is released. Layer: transport.
// Threading: release (or destroy) it on the executor of the connection that delivered it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "transport/lent_pointer.hpp"

namespace rdmarpc::transport {

class received_message {
 public:
  // Whoever owns the bytes (e.g. an rdma receive ring) and wants them back.
  class owner {
   public:
    virtual void release_message(std::uint64_t token) noexcept = 0;
    // A reference that keeps this owner alive, taken when a lent message leaves on_message.
    virtual std::shared_ptr<owner> keep_alive() noexcept = 0;

   protected:
    ~owner() = default;
  };

  received_message() noexcept {}
  // Bytes lent by `lender`, given back with `token` on release. The transport keeps `lender` alive
  // while it delivers the message (connection_handler::on_message), so the message holds no
  // reference meanwhile: two atomic operations a message saved. Moving the message takes one, so
  // a handler may keep it past on_message.
  received_message(std::span<const std::byte> bytes, owner& lender, std::uint64_t token) noexcept
      : bytes_(bytes), owner_(lender), token_(token) {}
  // Bytes owned by the message itself (reassembled rdma fragments).
  explicit received_message(std::vector<std::byte> storage) noexcept
      : bytes_(storage.data(), storage.size()), owns_storage_(true) {
    new (&storage_) std::vector<std::byte>(std::move(storage));
  }

  // Inline, as they run for every message on every transport. A moved vector keeps its heap
  // buffer, so a span into it stays valid after the move.
  received_message(received_message&& other) noexcept
      : bytes_(std::exchange(other.bytes_, {})), owner_(std::move(other.owner_)), token_(other.token_) {
    if (other.owns_storage_) [[unlikely]]
      take_storage(other);
  }
  received_message& operator=(received_message&& other) noexcept {
    if (this != &other) {
      release();
      bytes_ = std::exchange(other.bytes_, {});
      owner_ = std::move(other.owner_);
      token_ = other.token_;
      if (other.owns_storage_) [[unlikely]]
        take_storage(other);
    }
    return *this;
  }
  received_message(const received_message&) = delete;
  received_message& operator=(const received_message&) = delete;
  [[gnu::always_inline]] ~received_message() { release(); }

  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  std::size_t size() const noexcept { return bytes_.size(); }
  bool empty() const noexcept { return bytes_.empty(); }

  // Gives the bytes back; bytes() is empty afterwards. Idempotent. (Inline: the rpc layer releases
  // every message as soon as it is parsed, and the destructor then finds nothing to do.)
  [[gnu::always_inline]] void release() noexcept {
    bytes_ = {};
    if (owner_) owner_.let_go([token = token_](owner& o) { o.release_message(token); });
    if (owns_storage_) [[unlikely]]
      drop_storage();
  }

 private:
  void take_storage(received_message& other) noexcept {
    new (&storage_) std::vector<std::byte>(std::move(other.storage_));
    owns_storage_ = true;
    other.drop_storage();
  }
  void drop_storage() noexcept {
    storage_.~vector();
    owns_storage_ = false;
  }

  std::span<const std::byte> bytes_;
  lent_pointer<owner> owner_;  // empty: nothing to give back (empty, or storage_); lent inside on_message
  std::uint64_t token_ = 0;
  // Owned bytes live in a vector that exists only then (owns_storage_): a vector member would cost
  // every lent message (nearly all) an out-of-line destructor call for an empty vector.
  union {
    std::vector<std::byte> storage_;
  };
  bool owns_storage_ = false;
};

}  // namespace rdmarpc::transport
