#pragma once
// A message delivered by a transport::connection, readable in place (zero copy on rdma: the bytes
// live in the receive ring) until it is released. Layer: transport.
// Threading: release (or destroy) it on the executor of the connection that delivered it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace rdmarpc::transport {

class received_message {
 public:
  // Whoever owns the bytes (e.g. an rdma receive ring) and wants them back.
  class owner {
   public:
    virtual void release_message(std::uint64_t token) noexcept = 0;

   protected:
    ~owner() = default;
  };

  received_message() noexcept = default;
  // Borrowed bytes, given back to `owner` with `token` on release.
  received_message(std::span<const std::byte> bytes, std::shared_ptr<owner> owner,
                   std::uint64_t token) noexcept;
  // Bytes owned by the message itself (reassembled fragments, tcp, loopback).
  explicit received_message(std::vector<std::byte> storage) noexcept;

  received_message(received_message&& other) noexcept;
  received_message& operator=(received_message&& other) noexcept;
  received_message(const received_message&) = delete;
  received_message& operator=(const received_message&) = delete;
  ~received_message() { release(); }

  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  std::size_t size() const noexcept { return bytes_.size(); }
  bool empty() const noexcept { return bytes_.empty(); }

  // Gives the bytes back; bytes() is empty afterwards. Idempotent.
  void release() noexcept;

 private:
  std::span<const std::byte> bytes_;
  std::shared_ptr<owner> owner_;
  std::uint64_t token_ = 0;
  std::vector<std::byte> storage_;
};

}  // namespace rdmarpc::transport
