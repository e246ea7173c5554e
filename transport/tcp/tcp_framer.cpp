#include "transport/tcp/tcp_framer.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace rdmarpc::transport::tcp {

tcp_framer::tcp_framer(std::size_t max_message_size, std::size_t buffer_size, std::size_t body_chunk)
    : max_message_size_(max_message_size),
      body_chunk_(std::max<std::size_t>(body_chunk, 1)),
      buffer_size_(std::max(buffer_size, kHeaderSize + 1)),
      buffers_(1) {
  buffers_[0].bytes.resize(buffer_size_);
}

std::span<std::byte> tcp_framer::read_space_any() {
  if (in_body_) {
    body_read_at_ = body_.size();
    const std::size_t chunk = std::min(body_chunk_, body_length_ - body_read_at_);
    body_.resize(body_read_at_ + chunk);  // zero-fills only this chunk, which the read overwrites
    return {body_.data() + body_read_at_, chunk};
  }
  if (buffers_[current_].lent > 0) {
    // Lent messages lie before begin_: read on behind them while the rest of the frame (and a
    // read worth the syscall) fits, else in another buffer.
    const std::size_t worth_reading = std::min<std::size_t>(4096, buffer_size_ / 4);
    if (buffer_size_ - end_ < std::max(still_needed(), worth_reading)) move_to_free_buffer();
  } else if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (begin_ > 0) {  // keep the partial frame, make room behind it
    std::byte* data = buffers_[current_].bytes.data();
    std::memmove(data, data + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  return {buffers_[current_].bytes.data() + end_, buffer_size_ - end_};
}

void tcp_framer::empty_window() noexcept {
  begin_ = end_ = buffers_[current_].lent > 0 ? end_ : 0;  // lent messages before end_ stay untouched
}

std::size_t tcp_framer::still_needed() const noexcept {
  const std::size_t available = end_ - begin_;
  if (available < kHeaderSize) return kHeaderSize - available;
  const std::size_t frame = kHeaderSize + get_length(buffers_[current_].bytes.data() + begin_);
  return frame > available ? frame - available : 1;
}

void tcp_framer::move_to_free_buffer() {
  // The spare give_back kept (memory still there) first, else any free slot, else a new one.
  std::uint32_t next = 0;
  const auto usable = [&](std::uint32_t i) { return i != current_ && buffers_[i].lent == 0; };
  while (next < buffers_.size() && !(usable(next) && !buffers_[next].bytes.empty())) ++next;
  if (next == buffers_.size()) {
    next = 0;
    while (next < buffers_.size() && !usable(next)) ++next;
  }
  if (next == buffers_.size()) buffers_.emplace_back();
  auto& to = buffers_[next].bytes;
  to.resize(buffer_size_);  // zero-fills only a buffer made or freed here
  const std::byte* from = buffers_[current_].bytes.data();
  std::memcpy(to.data(), from + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
  current_ = next;
  ++retired_;  // the old one, until its messages come back
}

void tcp_framer::give_back(std::uint32_t id) noexcept {
  read_buffer& b = buffers_[id];
  if (--b.lent > 0 || id == current_) return;
  --retired_;
  // One spare buffer is kept for the next move; the memory of any other goes.
  for (std::uint32_t i = 0; i < buffers_.size(); ++i) {
    if (i != id && i != current_ && buffers_[i].lent == 0 && !buffers_[i].bytes.empty()) {
      b.bytes = std::vector<std::byte>();
      return;
    }
  }
}

void tcp_framer::commit(std::size_t n) noexcept {
  if (in_body_) {
    body_.resize(body_read_at_ + n);  // shrinking: no allocation
  } else {
    end_ += n;
  }
}

tcp_framer::event tcp_framer::next_any() {
  message_ = {};
  if (in_body_) {
    if (body_.size() < body_length_) return event::need_more;
    in_body_ = false;
    return event::large_message;
  }
  const std::size_t available = end_ - begin_;
  if (available < kHeaderSize) return event::need_more;
  const std::byte* frame = buffers_[current_].bytes.data() + begin_;
  const std::uint32_t length = get_length(frame);
  announced_ = length;
  if (goodbye_) return event::after_goodbye;
  if (length == kGoodbyeLength) {
    goodbye_ = true;
    begin_ += kHeaderSize;
    return event::goodbye;
  }
  if (length > max_message_size_) return event::too_large;
  if (available - kHeaderSize >= length) {
    message_ = {frame + kHeaderSize, length};
    begin_ += kHeaderSize + length;
    return event::message;
  }
  if (kHeaderSize + length <= buffer_size_) return event::need_more;  // fits once more is read
  // Too large for the buffer: the rest of the body is read straight into its own memory, which
  // grows with the bytes that arrive (see read_space).
  const std::size_t have = available - kHeaderSize;
  body_.assign(frame + kHeaderSize, frame + kHeaderSize + have);
  body_length_ = length;
  in_body_ = true;
  empty_window();
  return event::need_more;
}

std::vector<std::byte> tcp_framer::take_large() noexcept {
  return std::exchange(body_, std::vector<std::byte>());
}

void tcp_framer::discard() noexcept {
  empty_window();
  message_ = {};
  body_ = std::vector<std::byte>();  // not `= {}`: that keeps the capacity
  body_length_ = 0;
  in_body_ = false;
}

}  // namespace rdmarpc::transport::tcp
