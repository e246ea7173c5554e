#pragma once
// tcp_framer: the receiving half of tcp's framing without any I/O. A frame is a 4-byte
// little-endian length and then that many bytes; the length 0xffffffff alone is the peer's goodbye
// (its close()). The connection reads into read_space(), reports the bytes with commit() and takes
// events from next(); unit tests and the fuzzer drive it the same way, byte by byte.
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
  std::span<std::byte> read_space();
  // `n` bytes were read into the last read_space().
  void commit(std::size_t n) noexcept;
  // The next complete thing in what was committed. After after_goodbye or too_large the stream
  // cannot be parsed any further.
  event next();

  std::span<const std::byte> message() const noexcept { return message_; }
  std::vector<std::byte> take_large() noexcept;
  std::uint32_t announced() const noexcept { return announced_; }  // the last header's length
  bool said_goodbye() const noexcept { return goodbye_; }
  // No partial frame held: an EOF here is a clean end, anywhere else one in the middle of a frame.
  bool idle() const noexcept { return !in_body_ && begin_ == end_; }
  // Memory held for the large frame being read (tests: it follows the bytes that arrived).
  std::size_t body_capacity() const noexcept { return body_.capacity(); }

  // Drops everything buffered and the partial frame (draining after our close, or the end). The
  // read buffer stays: a read in progress may still reference it.
  void discard() noexcept;

 private:
  std::size_t max_message_size_;
  std::size_t body_chunk_;
  std::vector<std::byte> buffer_;
  std::size_t begin_ = 0, end_ = 0;  // the unparsed window of buffer_
  std::span<const std::byte> message_;
  std::vector<std::byte> body_;  // a frame too large for buffer_, read straight into its own memory
  std::size_t body_length_ = 0;
  std::size_t body_read_at_ = 0;  // where the last read_space() of body_ began
  bool in_body_ = false;
  bool goodbye_ = false;
  std::uint32_t announced_ = 0;
};

}  // namespace rdmarpc::transport::tcp
