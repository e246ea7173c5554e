#include "transport/message_buffers.hpp"

#include <utility>

namespace rdmarpc::transport {

message_buffers::message_buffers(std::size_t headroom, std::size_t limit_bytes)
    : headroom_(headroom), limit_(limit_bytes) {}

send_reservation message_buffers::reserve_grown(send_reservation::owner* owner, std::size_t bytes) {
  buffer b = spare_or_new();
  b->resize(headroom_ + bytes);  // the storage never shrinks: later messages up to this size fit
  return reserved(owner, b.release(), bytes);
}

void message_buffers::cancel(std::uint64_t token) noexcept {
  buffer b(reinterpret_cast<message_block*>(token));
  written(b->counted);
  b->counted = 0;
  recycle(std::move(b));
}

void message_buffers::free(buffer b) noexcept {
  b.reset();
}

message_buffers::buffer message_buffers::take_spare(std::size_t size) {
  buffer b = spare_or_new();
  b->resize(size);
  return b;
}

message_buffers::buffer message_buffers::wrap(std::vector<std::byte> bytes) {
  auto b = std::make_unique<message_block>();  // not a spare: its memory would be dropped
  b->size = bytes.size();
  b->storage = std::move(bytes);
  return b;
}

}  // namespace rdmarpc::transport
