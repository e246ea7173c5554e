#pragma once
// tcp_framer: the receiving half of tcp's framing without any I/O. A frame is a 4-byte
// little-endian length and then that many bytes; the length 0xffffffff alone is the peer's goodbye
// (its close()). The connection reads into read_space(), reports the bytes with commit() and takes
// events from next(); unit tests and the fuzzer drive it the same way, byte by byte.
// A message may be lent out in place (lend / give_back): its read buffer is then not reused until
// it comes back, and reads go on in the rest of it or in another buffer, so the rpc layer parses
// straight from the bytes the socket wrote.
// Layer: transport. Threading: belongs to one connection (its executor).

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/little_endian.hpp"

namespace rdmarpc::transport::tcp {

class tcp_framer {
 public:
  static constexpr std::size_t kHeaderSize = 4;
  static constexpr std::uint32_t kGoodbyeLength = 0xffffffff;   // never a message's length
  static constexpr std::size_t kDefaultBufferSize = 64 * 1024;  // small frames are parsed out of this
  // A larger frame's body is read in chunks of this size, so its memory follows what arrived: a
  // peer announcing 16 MiB and sending nothing costs nothing.
  static constexpr std::size_t kDefaultBodyChunk = 256 * 1024;
  // At most this many read buffers are kept by lent messages (the one being read into included):
  // a reader holding messages pins at most this many buffers; can_lend() is false beyond it.
  static constexpr std::size_t kMaxLendingBuffers = 8;

  enum class event {
    need_more,      // nothing complete: read more into read_space()
    message,        // a frame that fit the buffer: message() views it until the next call
    large_message,  // a frame read into its own memory: take_large()
    goodbye,        // the peer's close(); its FIN follows
    after_goodbye,  // bytes after the goodbye: a protocol error
    too_large,      // a header announcing more than max_message_size (announced()): a protocol error
  };

  // A frame header's length, little-endian.
  static void put_length(std::byte* header, std::uint32_t length) noexcept { store_le(header, length); }
  static std::uint32_t get_length(const std::byte* header) noexcept { return load_le<std::uint32_t>(header); }

  explicit tcp_framer(std::size_t max_message_size, std::size_t buffer_size = kDefaultBufferSize,
                      std::size_t body_chunk = kDefaultBodyChunk);

  // Where the next read goes (never empty). Inside a large frame: the next chunk of its body.
  // Inline: the usual case, everything parsed and nothing lent, reads into the whole buffer.
  std::span<std::byte> read_space() {
    read_buffer& b = buffers_[current_];
    if (!in_body_ && begin_ == end_ && b.lent == 0) [[likely]] {
      begin_ = end_ = 0;
      return {b.bytes.data(), buffer_size_};
    }
    return read_space_any();
  }
  // `n` bytes were read into the last read_space().
  void commit(std::size_t n) noexcept;
  // The next complete thing in what was committed. After after_goodbye or too_large the stream
  // cannot be parsed any further.
  event next() {
    // Inline: a whole frame that fits what was read (nearly every message), or nothing left.
    const std::size_t available = end_ - begin_;
    if (!in_body_ && !goodbye_ && available >= kHeaderSize) {
      const std::byte* frame = buffers_[current_].bytes.data() + begin_;
      const std::uint32_t length = get_length(frame);
      if (length <= max_message_size_ && length != kGoodbyeLength && available - kHeaderSize >= length) {
        announced_ = length;
        message_ = {frame + kHeaderSize, length};
        begin_ += kHeaderSize + length;
        return event::message;
      }
    } else if (!in_body_ && available == 0) {
      message_ = {};
      return event::need_more;
    }
    return next_any();
  }

  std::span<const std::byte> message() const noexcept { return message_; }
  // Whether the last event::message may be lent (lend) without pinning more than
  // kMaxLendingBuffers read buffers.
  bool can_lend() const noexcept { return buffers_[current_].lent > 0 || retired_ + 1 <= kMaxLendingBuffers; }
  // Lends the last event::message (can_lend() was true): message()'s bytes stay valid until
  // give_back(the returned id).
  std::uint32_t lend() noexcept {
    ++buffers_[current_].lent;
    return current_;
  }
  void give_back(std::uint32_t id) noexcept;
  // Read buffers kept by lent messages, and the memory of all read buffers (tests).
  std::size_t lending_buffers() const noexcept { return retired_ + (buffers_[current_].lent > 0 ? 1 : 0); }
  std::size_t read_buffer_bytes() const noexcept {
    std::size_t bytes = 0;
    for (const auto& b : buffers_) bytes += b.bytes.capacity();
    return bytes;
  }
  std::vector<std::byte> take_large() noexcept;
  std::uint32_t announced() const noexcept { return announced_; }  // the last header's length
  bool said_goodbye() const noexcept { return goodbye_; }
  // No partial frame held: an EOF here is a clean end, anywhere else one in the middle of a frame.
  bool idle() const noexcept { return !in_body_ && begin_ == end_; }
  // Memory held for the large frame being read (tests: it follows the bytes that arrived).
  std::size_t body_capacity() const noexcept { return body_.capacity(); }

  // Drops everything buffered and the partial frame (draining after our close, or the end). The
  // read buffers stay: a read in progress or a lent message may still reference them.
  void discard() noexcept;

 private:
  struct read_buffer {
    std::vector<std::byte> bytes;
    std::size_t lent = 0;  // messages in it not given back yet
  };
  event next_any();                       // next(), every case
  std::span<std::byte> read_space_any();  // read_space(), every case

  // Nothing unparsed any more; the window starts again at 0 unless messages are lent before it.
  void empty_window() noexcept;
  // The bytes the partial frame at begin_ still needs to be whole (at least 1).
  std::size_t still_needed() const noexcept;
  // Moves the partial frame to the front of a buffer no message is lent from (the current one is).
  void move_to_free_buffer();

  std::size_t max_message_size_;
  std::size_t body_chunk_;
  std::size_t buffer_size_;
  // [current_] is read into; any other is kept by lent messages (retired_ of them) or spare.
  std::vector<read_buffer> buffers_;
  std::uint32_t current_ = 0;
  std::size_t retired_ = 0;
  std::size_t begin_ = 0, end_ = 0;  // the unparsed window of buffers_[current_]
  std::span<const std::byte> message_;
  std::vector<std::byte> body_;  // a frame too large for a read buffer, read straight into its own memory
  std::size_t body_length_ = 0;
  std::size_t body_read_at_ = 0;  // where the last read_space() of body_ began
  bool in_body_ = false;
  bool goodbye_ = false;
  std::uint32_t announced_ = 0;
};

}  // namespace rdmarpc::transport::tcp
