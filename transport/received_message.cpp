#include "transport/received_message.hpp"

#include <utility>

namespace rdmarpc::transport {

received_message::received_message(std::span<const std::byte> bytes, std::shared_ptr<owner> owner,
                                   std::uint64_t token) noexcept
    : bytes_(bytes), owner_(std::move(owner)), token_(token) {}

received_message::received_message(std::vector<std::byte> storage) noexcept : storage_(std::move(storage)) {
  bytes_ = std::span<const std::byte>(storage_.data(), storage_.size());
}

received_message::received_message(received_message&& other) noexcept {
  *this = std::move(other);
}

received_message& received_message::operator=(received_message&& other) noexcept {
  if (this == &other) return *this;
  release();
  owner_ = std::move(other.owner_);
  token_ = other.token_;
  // A moved vector keeps its heap buffer, so a span into it stays valid after the move.
  storage_ = std::move(other.storage_);
  bytes_ = other.bytes_;
  other.bytes_ = {};
  other.storage_.clear();
  return *this;
}

void received_message::release() noexcept {
  if (owner_) {
    auto owner = std::move(owner_);
    owner_.reset();
    owner->release_message(token_);
  }
  storage_.clear();
  storage_.shrink_to_fit();
  bytes_ = {};
}

}  // namespace rdmarpc::transport
