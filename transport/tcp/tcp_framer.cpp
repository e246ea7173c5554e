#include "transport/tcp/tcp_framer.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace rdmarpc::transport::tcp {

tcp_framer::tcp_framer(std::size_t max_message_size, std::size_t buffer_size, std::size_t body_chunk)
    : max_message_size_(max_message_size),
      body_chunk_(std::max<std::size_t>(body_chunk, 1)),
      buffer_(std::max(buffer_size, kHeaderSize + 1)) {}

std::span<std::byte> tcp_framer::read_space() {
  if (in_body_) {
    body_read_at_ = body_.size();
    const std::size_t chunk = std::min(body_chunk_, body_length_ - body_read_at_);
    body_.resize(body_read_at_ + chunk);  // zero-fills only this chunk, which the read overwrites
    return {body_.data() + body_read_at_, chunk};
  }
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (begin_ > 0) {  // keep the partial frame, make room behind it
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  return {buffer_.data() + end_, buffer_.size() - end_};
}

void tcp_framer::commit(std::size_t n) noexcept {
  if (in_body_) {
    body_.resize(body_read_at_ + n);  // shrinking: no allocation
  } else {
    end_ += n;
  }
}

tcp_framer::event tcp_framer::next() {
  message_ = {};
  if (in_body_) {
    if (body_.size() < body_length_) return event::need_more;
    in_body_ = false;
    return event::large_message;
  }
  const std::size_t available = end_ - begin_;
  if (available < kHeaderSize) return event::need_more;
  const std::byte* frame = buffer_.data() + begin_;
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
  if (kHeaderSize + length <= buffer_.size()) return event::need_more;  // fits once more is read
  // Too large for the buffer: the rest of the body is read straight into its own memory, which
  // grows with the bytes that arrive (see read_space).
  const std::size_t have = available - kHeaderSize;
  body_.assign(frame + kHeaderSize, frame + kHeaderSize + have);
  body_length_ = length;
  in_body_ = true;
  begin_ = end_ = 0;
  return event::need_more;
}

std::vector<std::byte> tcp_framer::take_large() noexcept {
  return std::exchange(body_, std::vector<std::byte>());
}

void tcp_framer::discard() noexcept {
  begin_ = end_ = 0;
  message_ = {};
  body_ = std::vector<std::byte>();  // not `= {}`: that keeps the capacity
  body_length_ = 0;
  in_body_ = false;
}

}  // namespace rdmarpc::transport::tcp
