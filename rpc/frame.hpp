#pragma once
// The rpc wire frame: a little-endian header, then optional extras (a wire.proto message:
// request metadata or a response's status message), then the protobuf payload. The frames sent
// per call or per streamed message (request, response, stream_message) have a compact header (6 to
// 22 bytes: only the fields they use); every other kind a full 32-byte one.
// Layer: rpc. Threading: stateless pure functions, safe from any thread. Exact format: docs/wire-format.md.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "rpc/status.hpp"
#include "transport/little_endian.hpp"

namespace rdmarpc::frame {

inline constexpr std::uint16_t kMagic = 0x5252;  // bytes 'R','R' on the wire
inline constexpr std::uint8_t kVersion = 2;      // 2: request, response and stream_message in compact form
inline constexpr std::size_t kHeaderSize = 32;   // a full header (every kind without a compact one)
// The first byte of a compact header (a full header starts with kMagic's 'R'): 0xC0 | kind.
inline constexpr std::uint8_t kCompactRequest = 0xC1;
inline constexpr std::uint8_t kCompactResponse = 0xC2;
inline constexpr std::uint8_t kCompactStreamMessage = 0xC5;
// A compact request: tag, flags, call_id, method_id [, timeout_us] [, extras_length]; a compact
// response: tag, status (| kCompactHasExtras), call_id [, extras_length]; a compact
// stream_message: tag, flags (kCompactHasExtras or 0), call_id [, extras_length].
inline constexpr std::size_t kCompactRequestSize = 10;
inline constexpr std::size_t kCompactResponseSize = 6;
inline constexpr std::size_t kCompactStreamMessageSize = 6;
inline constexpr std::size_t kMaxCompactHeaderSize = kCompactRequestSize + 8 + 4;

enum class kind : std::uint8_t {
  request = 1,   // client -> server: call a method
  response = 2,  // server -> client: status (+ reply payload when OK)
  cancel = 3,    // client -> server: stop working on call_id, no response expected
  // Streams (docs/wire-format.md, Streams): call_id is the stream id.
  stream_open = 4,      // client -> server: method_id, timeout; extras: RequestExtras (+ window)
  stream_message = 5,   // both: one message; a server's first one may carry ResponseExtras
  half_close = 6,       // client -> server: no more messages from the client
  trailers = 7,         // server -> client: status; extras: ResponseExtras. Ends the stream
  reset = 8,            // both: status (why); extras: optional ResponseExtras. Ends the stream
  window_update = 9,    // both: method_id = messages granted, timeout_us = bytes granted
  stream_headers = 10,  // server -> client: method_id/timeout_us = the server's receive window
  // Heartbeats (docs/wire-format.md, Heartbeats): connection-level, call_id 0.
  ping = 11,  // both: timeout_us = an opaque value the pong echoes
  pong = 12,  // both: timeout_us = the ping's value
  // Graceful shutdown (docs/wire-format.md, Going away): connection-level, call_id 0, no fields.
  going_away = 13,  // server -> client: send nothing new here; client -> server: understood
};
inline constexpr std::uint8_t kLastKind = 13;

// A ping or a pong.
constexpr bool is_heartbeat(kind k) noexcept {
  return k == kind::ping || k == kind::pong;
}

// Header flag bits; any other bit set is a malformed frame.
inline constexpr std::uint8_t kFlagHasTimeout = 0x01;  // request: timeout_us is meaningful
inline constexpr std::uint8_t kKnownFlags = kFlagHasTimeout;
// Compact headers only: extras_length follows (in a request's or stream_message's flags byte, a
// response's status byte).
inline constexpr std::uint8_t kCompactHasExtras = 0x80;
// Longest timeout a request may carry (2^40 us, about 12.7 days). Callers with a later deadline
// send no timeout (the client still enforces its own deadline); larger values are malformed, so a
// receiver never overflows its clock computing now + timeout.
inline constexpr std::uint64_t kMaxTimeoutUs = std::uint64_t{1} << 40;

struct header {
  frame::kind kind = kind::request;
  std::uint8_t flags = 0;
  status_code status = status_code::ok;  // response only
  std::uint32_t call_id = 0;
  std::uint32_t method_id = 0;   // request, stream_open; messages in window_update/stream_headers
  std::uint64_t timeout_us = 0;  // relative to receipt (clock-independent across hosts); bytes in
                                 // window_update/stream_headers; the opaque value of ping/pong
  std::uint32_t extras_length = 0;
  std::uint32_t payload_length = 0;

  bool has_timeout() const noexcept { return (flags & kFlagHasTimeout) != 0; }
};

// A decoded frame: views into the message that was decoded (valid as long as it is).
struct view {
  frame::header header;
  std::span<const std::byte> extras;
  std::span<const std::byte> payload;
};

enum class decode_error : std::uint8_t {
  none = 0,
  truncated,  // shorter than the header
  bad_magic,
  bad_version,
  bad_kind,
  bad_flags,        // unknown flag bits, or a flag not allowed for this kind
  bad_status,       // status out of range, or non-OK where the kind has no status
  bad_field,        // a field that must be zero for this kind is not (reserved, method, timeout...)
  length_mismatch,  // header + extras + payload != message size (including overflow)
};

const char* to_string(decode_error e) noexcept;

// Bytes `h` takes on the wire: compact for a request, a response or a stream_message (from its
// flags and extras_length), kHeaderSize for every other kind. The frame is header_size(h) + extras
// + payload.
inline std::size_t header_size(const header& h) noexcept {
  const std::size_t extras = h.extras_length != 0 ? 4 : 0;
  if (h.kind == kind::request) return kCompactRequestSize + (h.has_timeout() ? 8 : 0) + extras;
  if (h.kind == kind::response) return kCompactResponseSize + extras;
  if (h.kind == kind::stream_message) return kCompactStreamMessageSize + extras;
  return kHeaderSize;
}
// Writes `h` into `out`, which holds at least header_size(h) bytes; returns header_size(h). The
// caller guarantees h is valid (encode does not validate: the codec's senders build headers from
// typed values). A compact header carries no payload_length: the message's size implies it.
inline std::size_t encode_header(const header& h, std::span<std::byte> out) noexcept;
// The same for every header (encode_header's out-of-line part).
std::size_t encode_any_header(const header& h, std::span<std::byte> out) noexcept;
// A whole header-only frame of a kind with a full header (not one with a compact header).
std::array<std::byte, kHeaderSize> encode_full_header(const header& h) noexcept;
// A ping's or pong's payload: the sender's heartbeat domain (heartbeat_ticker), 8 bytes little-endian;
// an empty payload means the sender names none.
inline constexpr std::size_t kHeartbeatDomainSize = 8;
inline constexpr std::size_t kHeartbeatSize = kHeaderSize + kHeartbeatDomainSize;
// A whole ping or pong frame (`k`): the opaque `value` in timeout_us, the sender's heartbeat
// `domain` as payload, every other field zero.
std::array<std::byte, kHeartbeatSize> encode_heartbeat(kind k, std::uint64_t value,
                                                       std::uint64_t domain) noexcept;
// The sender's heartbeat domain of a decoded ping or pong (0: none named).
std::uint64_t heartbeat_domain(const view& v) noexcept;

// Parses and validates a whole message. On failure `err` says why and the result is unspecified.
inline view decode(std::span<const std::byte> message, decode_error& err) noexcept;
// The same, field by field for every kind. decode takes a shortcut for the compact kinds without
// timeout, status or extras, and comes here for the rest (tests compare the two).
view decode_any(std::span<const std::byte> message, decode_error& err) noexcept;

// A status as its byte on the wire: a code outside the canonical 0..16 (a handler's cast of its
// own number) goes out as UNKNOWN, never as a byte the peer would misread (a compact response
// keeps its top bit for "has extras") or refuse as malformed.
inline std::uint8_t status_byte(status_code s) noexcept {
  return static_cast<std::uint8_t>(canonical(s));
}

// Inline: what nearly every call and streamed message sends, a request without timeout or extras
// and a response without extras; the rest out of line.
inline std::size_t encode_header(const header& h, std::span<std::byte> out) noexcept {
  std::byte* p = out.data();
  if (h.extras_length == 0) {
    if (h.kind == kind::request && h.flags == 0) {
      transport::store_le<std::uint16_t>(p, kCompactRequest);  // the tag, then no flags
      transport::store_le<std::uint32_t>(p + 2, h.call_id);
      transport::store_le<std::uint32_t>(p + 6, h.method_id);
      return kCompactRequestSize;
    }
    if (h.kind == kind::response) {
      transport::store_le<std::uint8_t>(p, kCompactResponse);
      transport::store_le<std::uint8_t>(p + 1, status_byte(h.status));
      transport::store_le<std::uint32_t>(p + 2, h.call_id);
      return kCompactResponseSize;
    }
  }
  return encode_any_header(h, out);
}

// Inline: a request without timeout or extras, an OK response or a stream_message without extras.
// Everything else is checked field by field (decode_any).
inline view decode(std::span<const std::byte> message, decode_error& err) noexcept {
  view v;
  const std::byte* p = message.data();
  const std::size_t size = message.size();
  if (size >= kCompactRequestSize && transport::load_le<std::uint16_t>(p) == kCompactRequest) {
    v.header.call_id = transport::load_le<std::uint32_t>(p + 2);
    v.header.method_id = transport::load_le<std::uint32_t>(p + 6);
    v.payload = message.subspan(kCompactRequestSize);
  } else if (size >= kCompactResponseSize && transport::load_le<std::uint16_t>(p) == kCompactResponse) {
    v.header.kind = kind::response;
    v.header.call_id = transport::load_le<std::uint32_t>(p + 2);
    v.payload = message.subspan(kCompactResponseSize);
  } else if (size >= kCompactStreamMessageSize &&
             transport::load_le<std::uint16_t>(p) == kCompactStreamMessage) {
    v.header.kind = kind::stream_message;
    v.header.call_id = transport::load_le<std::uint32_t>(p + 2);
    v.payload = message.subspan(kCompactStreamMessageSize);
  } else {
    v = decode_any(message, err);  // (assigned, not returned: one object for every path)
    return v;
  }
  if (v.payload.size() > std::numeric_limits<std::uint32_t>::max()) [[unlikely]] {
    err = decode_error::length_mismatch;
    return v;
  }
  v.header.payload_length = static_cast<std::uint32_t>(v.payload.size());
  err = decode_error::none;
  return v;
}

}  // namespace rdmarpc::frame
