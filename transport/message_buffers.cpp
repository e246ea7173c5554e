#include "transport/message_buffers.hpp"

#include <utility>

namespace rdmarpc::transport {
namespace {
constexpr std::size_t kSpareBuffers = 16;              // recycled buffers kept
constexpr std::size_t kSpareBufferBytes = 256 * 1024;  // ... none larger than this
}  // namespace

send_reservation message_buffers::reserve(send_reservation::owner* owner, std::size_t bytes) {
  std::uint32_t token;
  if (!free_slots_.empty()) {
    token = free_slots_.back();
    free_slots_.pop_back();
  } else {
    token = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slot& s = slots_[token];
  if (!spare_.empty()) {
    s.data = std::move(spare_.back());
    spare_.pop_back();
  }
  // resize() only writes the bytes beyond the buffer's previous size: a recycled buffer costs
  // nothing for messages up to the size it had.
  s.data.resize(headroom_ + bytes);
  s.bytes = bytes;
  s.used = true;
  queued_ += bytes;
  return send_reservation(owner, token, std::span<std::byte>(s.data.data() + headroom_, bytes));
}

message_buffers::buffer message_buffers::take(std::uint64_t token, std::size_t size) {
  slot& s = slots_[token];
  buffer b = std::move(s.data);
  b.resize(headroom_ + size);
  written(s.bytes - size);  // clamped: after clear() nothing is counted any more
  s.used = false;
  free_slots_.push_back(static_cast<std::uint32_t>(token));
  return b;
}

void message_buffers::cancel(std::uint64_t token) noexcept {
  slot& s = slots_[token];
  written(s.bytes);
  recycle(std::move(s.data));
  s.data = {};
  s.used = false;
  free_slots_.push_back(static_cast<std::uint32_t>(token));
}

message_buffers::buffer message_buffers::take_spare(std::size_t size) {
  buffer b;
  if (!spare_.empty()) {
    b = std::move(spare_.back());
    spare_.pop_back();
  }
  b.resize(size);
  return b;
}

std::uint64_t message_buffers::lend(buffer b) {
  std::uint32_t token;
  if (!free_lent_.empty()) {
    token = free_lent_.back();
    free_lent_.pop_back();
    lent_[token] = std::move(b);
  } else {
    token = static_cast<std::uint32_t>(lent_.size());
    lent_.push_back(std::move(b));
  }
  return token;
}

void message_buffers::give_back(std::uint64_t token) noexcept {
  recycle(std::move(lent_[token]));
  lent_[token] = {};
  free_lent_.push_back(static_cast<std::uint32_t>(token));
}

void message_buffers::recycle(buffer b) noexcept {
  if (spare_.size() < kSpareBuffers && b.capacity() <= kSpareBufferBytes) spare_.push_back(std::move(b));
}

}  // namespace rdmarpc::transport
