#pragma once
// stream_state: which frames one end of a stream may still send and accept, as a pure state
// machine (no I/O). The client opens a stream, writes messages and half-closes ("writes done");
// the server writes messages and ends the stream with trailers (status, trailing metadata);
// either side may reset it (cancel, deadline, a violation). A frame the peer may not send in the
// current state is a violation, answered by resetting that stream (docs/wire-format.md, Streams).
// Layer: rpc. Threading: owned by one stream, used on its connection's executor.

#include <cstdint>

namespace rdmarpc {

class stream_state {
 public:
  enum class side : std::uint8_t { client, server };
  enum class verdict : std::uint8_t {
    accept,     // the frame is legal; the stream goes on
    ends,       // the frame is legal and ends the stream (trailers, reset)
    ignore,     // the stream already ended here: a frame that crossed our end, dropped silently
    violation,  // the peer may not send this now: reset the stream
  };

  explicit stream_state(side s) noexcept : side_(s) {}

  bool is_closed() const noexcept { return closed_; }
  // We may still write messages (not half-closed / not finished, not closed).
  bool can_write() const noexcept { return !closed_ && local_open_; }
  // The peer may still send messages.
  bool peer_can_write() const noexcept { return !closed_ && remote_open_; }

  // --- what the peer sent ----------------------------------------------------------------
  // After the stream ended here (our reset or trailers, theirs), anything may still be in flight
  // from the peer: ignored, never a violation.
  verdict on_peer_message() const noexcept {
    if (closed_) return verdict::ignore;
    return remote_open_ ? verdict::accept : verdict::violation;
  }
  // Only a client half-closes, once.
  verdict on_peer_half_close() noexcept {
    if (closed_) return verdict::ignore;
    if (side_ != side::server || !remote_open_) return verdict::violation;
    remote_open_ = false;
    return verdict::accept;
  }
  // Only a server sends trailers; they end the stream.
  verdict on_peer_trailers() noexcept {
    if (side_ != side::client) return verdict::violation;
    if (closed_) return verdict::ignore;
    closed_ = true;
    return verdict::ends;
  }
  verdict on_peer_reset() noexcept {
    if (closed_) return verdict::ignore;
    closed_ = true;
    return verdict::ends;
  }

  // --- what we send (false: not allowed now; nothing is sent) ---------------------------
  bool write_message() const noexcept { return can_write(); }
  bool write_half_close() noexcept {
    if (side_ != side::client || !can_write()) return false;
    local_open_ = false;
    return true;
  }
  bool write_trailers() noexcept {
    if (side_ != side::server || closed_) return false;
    closed_ = true;
    return true;
  }
  bool write_reset() noexcept {
    if (closed_) return false;
    closed_ = true;
    return true;
  }

 private:
  side side_;
  bool local_open_ = true;   // we have not half-closed (client) / finished (server)
  bool remote_open_ = true;  // the peer has not half-closed (as a server sees the client)
  bool closed_ = false;
};

}  // namespace rdmarpc
