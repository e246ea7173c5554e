#pragma once
// Per-stream flow control, as pure arithmetic (no I/O): the reader of one direction of a stream
// grants a window of bytes and messages; the writer spends it; the reader grants back what its
// user consumed. A writer may start a message while it holds a message credit and any byte credit
// (so a message larger than what is left of the window still goes and a small window never
// deadlocks); memory a reader holds for a stream is at most its window plus one message, whatever
// the peer does. Layer: rpc. Threading: owned by one stream, used on its connection's executor.

#include <algorithm>
#include <cstdint>
#include <optional>

namespace rdmarpc {

struct stream_window_size {
  std::uint64_t bytes = 0;
  std::uint32_t messages = 0;
  bool operator==(const stream_window_size&) const = default;
};

// Byte counts above this are clamped to it: far above any message, and no int64 can overflow.
inline constexpr std::uint64_t kMaxStreamWindowBytes = std::uint64_t{1} << 48;

// A reader's window when it announces none (docs/wire-format.md).
inline constexpr stream_window_size kDefaultStreamWindow{1u << 20, 64};
// What a client may send on a new stream before the server's stream_headers announce its window
// (as HTTP/2's initial window): a server's window is never smaller (a smaller setting is raised).
inline constexpr stream_window_size kInitialStreamWindow{64u << 10, 16};

// A window as both sides use it: at least 1 byte and 1 message, at most kMaxStreamWindowBytes, so
// a peer announcing 0 cannot stall a writer forever nor a huge value overflow it.
constexpr stream_window_size normalised(stream_window_size w) noexcept {
  return {std::clamp<std::uint64_t>(w.bytes, 1, kMaxStreamWindowBytes),
          std::max<std::uint32_t>(w.messages, 1)};
}

// The writer's side: what it may still send.
class stream_send_window {
 public:
  // The reader's announced window, normalised as the reader normalises it.
  explicit stream_send_window(stream_window_size reader_window) noexcept
      : limit_(normalised(reader_window)),
        bytes_(static_cast<std::int64_t>(limit_.bytes)),
        messages_(limit_.messages) {}

  bool can_send() const noexcept { return messages_ > 0 && bytes_ > 0; }
  // The reader announced its whole window (stream_headers) after we started with a smaller
  // assumed one (kInitialStreamWindow): the difference becomes credit. A smaller announcement
  // changes nothing (the reader must honour what we assumed).
  void on_announced(stream_window_size reader_window) noexcept {
    const stream_window_size w = normalised(reader_window);
    if (w.bytes > limit_.bytes) {
      bytes_ += static_cast<std::int64_t>(w.bytes - limit_.bytes);
      limit_.bytes = w.bytes;
    }
    if (w.messages > limit_.messages) {
      messages_ += w.messages - limit_.messages;
      limit_.messages = w.messages;
    }
  }
  // Spends credit for a message of `size` bytes. Precondition: can_send().
  void on_sent(std::uint64_t size) noexcept {
    --messages_;
    bytes_ -= static_cast<std::int64_t>(std::min<std::uint64_t>(size, kMaxStreamWindowBytes));
  }
  // The reader granted credit back. False when that would exceed the reader's window (a
  // protocol violation: the stream is reset); nothing changes then.
  [[nodiscard]] bool on_granted(stream_window_size grant) noexcept {
    if (grant.bytes > kMaxStreamWindowBytes || grant.messages > limit_.messages - messages_) return false;
    if (bytes_ + static_cast<std::int64_t>(grant.bytes) > static_cast<std::int64_t>(limit_.bytes))
      return false;
    bytes_ += static_cast<std::int64_t>(grant.bytes);
    messages_ += grant.messages;
    return true;
  }

  std::int64_t bytes() const noexcept { return bytes_; }  // may be negative after a large message
  std::uint32_t messages() const noexcept { return messages_; }

 private:
  stream_window_size limit_;
  std::int64_t bytes_;
  std::uint32_t messages_;
};

// The reader's side: what the writer may still send, what the user holds, when to grant.
class stream_receive_window {
 public:
  explicit stream_receive_window(stream_window_size window) noexcept
      : window_(normalised(window)),
        bytes_(static_cast<std::int64_t>(window_.bytes)),
        messages_(window_.messages) {}

  const stream_window_size& window() const noexcept { return window_; }

  // A message of `size` bytes arrived. False when the writer had no credit for it (a protocol
  // violation: the stream is reset); it is not counted then.
  [[nodiscard]] bool on_received(std::uint64_t size) noexcept {
    if (messages_ == 0 || bytes_ <= 0 || size > kMaxStreamWindowBytes) return false;
    --messages_;
    bytes_ -= static_cast<std::int64_t>(size);
    held_bytes_ += size;
    ++held_messages_;
    return true;
  }

  // The user took a message of `size` bytes (it was received). Returns the grant to send now:
  // once half the window (bytes or messages) was consumed, everything consumed since the last one.
  std::optional<stream_window_size> on_consumed(std::uint64_t size) noexcept {
    held_bytes_ -= std::min(held_bytes_, size);
    if (held_messages_ > 0) --held_messages_;
    consumed_.bytes += size;
    ++consumed_.messages;
    if (consumed_.messages < (window_.messages + 1) / 2 && consumed_.bytes < (window_.bytes + 1) / 2) {
      return std::nullopt;
    }
    const stream_window_size grant = consumed_;
    consumed_ = {};
    bytes_ += static_cast<std::int64_t>(grant.bytes);
    messages_ += grant.messages;
    return grant;
  }

  // Received, not yet consumed: what this stream holds in memory.
  std::uint64_t held_bytes() const noexcept { return held_bytes_; }
  std::uint32_t held_messages() const noexcept { return held_messages_; }

 private:
  stream_window_size window_;
  std::int64_t bytes_;           // the writer's byte credit, as we track it
  std::uint32_t messages_;       // the writer's message credit
  stream_window_size consumed_;  // consumed since the last grant
  std::uint64_t held_bytes_ = 0;
  std::uint32_t held_messages_ = 0;
};

}  // namespace rdmarpc
