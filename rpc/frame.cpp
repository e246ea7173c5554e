#include "rpc/frame.hpp"

#include <cstring>
#include <limits>

#include "transport/little_endian.hpp"

namespace rdmarpc::frame {
namespace {

using transport::load_le;
using transport::store_le;

// Field offsets (see docs/wire-format.md).
constexpr std::size_t kOffMagic = 0;
constexpr std::size_t kOffVersion = 2;
constexpr std::size_t kOffKind = 3;
constexpr std::size_t kOffFlags = 4;
constexpr std::size_t kOffStatus = 5;
constexpr std::size_t kOffReserved = 6;
constexpr std::size_t kOffCallId = 8;
constexpr std::size_t kOffMethodId = 12;
constexpr std::size_t kOffTimeout = 16;
constexpr std::size_t kOffExtras = 24;
constexpr std::size_t kOffPayload = 28;
static_assert(kOffPayload + 4 == kHeaderSize);

constexpr std::uint8_t kMaxStatus = static_cast<std::uint8_t>(status_code::unauthenticated);

// What each kind may carry. A field it may not carry must be zero.
struct kind_rules {
  bool timeout_flag;  // HAS_TIMEOUT allowed (then timeout_us <= kMaxTimeoutUs, else 0)
  bool status;        // a status (0..16); else 0
  bool method;        // method_id meaningful
  bool window;        // method_id = messages, timeout_us = bytes (<= 2^48)
  bool extras;
  bool payload;
  bool opaque = false;      // timeout_us is an opaque 64-bit value (ping, pong)
  bool connection = false;  // about the connection, not a call: call_id must be 0
};

constexpr kind_rules rules_of(kind k) noexcept {
  switch (k) {
    case kind::request:
    case kind::response:
    case kind::stream_message: return {};  // compact headers: decode_compact checks them, never this
    case kind::cancel: return {false, false, false, false, false, false};
    case kind::stream_open: return {true, false, true, false, true, false};
    case kind::half_close: return {false, false, false, false, false, false};
    case kind::trailers: return {false, true, false, false, true, false};
    case kind::reset: return {false, true, false, false, true, false};
    case kind::window_update: return {false, false, false, true, false, false};
    case kind::stream_headers: return {false, false, false, true, false, false};
    case kind::ping:
    case kind::pong: return {false, false, false, false, false, true, true, true};
    case kind::going_away: return {false, false, false, false, false, false, false, true};
  }
  return {};
}

// Largest byte count a window field may carry (rpc/stream_window.hpp's kMaxStreamWindowBytes).
constexpr std::uint64_t kMaxWindowBytes = std::uint64_t{1} << 48;

decode_error check_fields(const header& h, std::uint8_t raw_status) noexcept {
  const kind_rules r = rules_of(h.kind);
  if (!r.timeout_flag && h.flags != 0) return decode_error::bad_flags;
  if (r.status ? raw_status > kMaxStatus : raw_status != 0) return decode_error::bad_status;
  if (r.timeout_flag) {
    if (h.has_timeout() ? h.timeout_us > kMaxTimeoutUs : h.timeout_us != 0) return decode_error::bad_field;
  } else if (r.window) {
    if (h.timeout_us > kMaxWindowBytes) return decode_error::bad_field;
  } else if (!r.opaque && h.timeout_us != 0) {
    return decode_error::bad_field;
  }
  if (!r.method && !r.window && h.method_id != 0) return decode_error::bad_field;
  if (r.connection && h.call_id != 0) return decode_error::bad_field;
  if ((!r.extras && h.extras_length != 0) || (!r.payload && h.payload_length != 0)) {
    return decode_error::bad_field;
  }
  // A heartbeat's payload is empty or the sender's 8-byte heartbeat domain.
  if (r.opaque && h.payload_length != 0 && h.payload_length != kHeartbeatDomainSize) {
    return decode_error::bad_field;
  }
  return decode_error::none;
}

}  // namespace

const char* to_string(decode_error e) noexcept {
  switch (e) {
    case decode_error::none: return "ok";
    case decode_error::truncated: return "frame shorter than its header";
    case decode_error::bad_magic: return "bad magic";
    case decode_error::bad_version: return "unsupported frame version";
    case decode_error::bad_kind: return "unknown frame kind";
    case decode_error::bad_flags: return "invalid flags";
    case decode_error::bad_status: return "invalid status code";
    case decode_error::bad_field: return "invalid header field";
    case decode_error::length_mismatch: return "lengths do not match the message size";
  }
  return "unknown decode error";
}

namespace {

void encode_full(const header& h, std::byte* p) noexcept {
  store_le<std::uint16_t>(p + kOffMagic, kMagic);
  store_le<std::uint8_t>(p + kOffVersion, kVersion);
  store_le<std::uint8_t>(p + kOffKind, static_cast<std::uint8_t>(h.kind));
  store_le<std::uint8_t>(p + kOffFlags, h.flags);
  store_le<std::uint8_t>(p + kOffStatus, status_byte(h.status));
  store_le<std::uint16_t>(p + kOffReserved, 0);
  store_le<std::uint32_t>(p + kOffCallId, h.call_id);
  store_le<std::uint32_t>(p + kOffMethodId, h.method_id);
  store_le<std::uint64_t>(p + kOffTimeout, h.timeout_us);
  store_le<std::uint32_t>(p + kOffExtras, h.extras_length);
  store_le<std::uint32_t>(p + kOffPayload, h.payload_length);
}

constexpr std::uint8_t kStatusMask = 0x1f;  // a compact response's status bits (0..16)

}  // namespace

std::size_t encode_any_header(const header& h, std::span<std::byte> out) noexcept {
  std::byte* p = out.data();
  const bool has_extras = h.extras_length != 0;
  std::size_t at = 0;
  switch (h.kind) {
    case kind::request:
      store_le<std::uint8_t>(p, kCompactRequest);
      store_le<std::uint8_t>(p + 1,
                             static_cast<std::uint8_t>(h.flags | (has_extras ? kCompactHasExtras : 0)));
      store_le<std::uint32_t>(p + 2, h.call_id);
      store_le<std::uint32_t>(p + 6, h.method_id);
      at = kCompactRequestSize;
      if (h.has_timeout()) {
        store_le<std::uint64_t>(p + at, h.timeout_us);
        at += 8;
      }
      break;
    case kind::response:
      store_le<std::uint8_t>(p, kCompactResponse);
      store_le<std::uint8_t>(
          p + 1, static_cast<std::uint8_t>(status_byte(h.status) | (has_extras ? kCompactHasExtras : 0)));
      store_le<std::uint32_t>(p + 2, h.call_id);
      at = kCompactResponseSize;
      break;
    case kind::stream_message:
      store_le<std::uint8_t>(p, kCompactStreamMessage);
      store_le<std::uint8_t>(p + 1, has_extras ? kCompactHasExtras : 0);
      store_le<std::uint32_t>(p + 2, h.call_id);
      at = kCompactStreamMessageSize;
      break;
    default: encode_full(h, p); return kHeaderSize;
  }
  if (has_extras) {
    store_le<std::uint32_t>(p + at, h.extras_length);
    at += 4;
  }
  return at;
}

std::array<std::byte, kHeaderSize> encode_full_header(const header& h) noexcept {
  std::array<std::byte, kHeaderSize> out{};
  encode_full(h, out.data());
  return out;
}

namespace {

// A compact request, response or stream_message (message[0] is its tag), checked field by field.
[[gnu::always_inline]] inline decode_error decode_compact(std::span<const std::byte> message,
                                                          view& v) noexcept {
  const std::byte* p = message.data();
  const std::size_t size = message.size();
  header& h = v.header;
  std::size_t at = 0;
  bool has_extras = false;
  if (load_le<std::uint8_t>(p) == kCompactRequest) {
    if (size < kCompactRequestSize) return decode_error::truncated;
    const auto flags = load_le<std::uint8_t>(p + 1);
    if ((flags & ~(kKnownFlags | kCompactHasExtras)) != 0) return decode_error::bad_flags;
    h.kind = kind::request;
    h.flags = static_cast<std::uint8_t>(flags & kKnownFlags);
    h.call_id = load_le<std::uint32_t>(p + 2);
    h.method_id = load_le<std::uint32_t>(p + 6);
    at = kCompactRequestSize;
    if (h.has_timeout()) {
      if (size < at + 8) return decode_error::truncated;
      h.timeout_us = load_le<std::uint64_t>(p + at);
      if (h.timeout_us > kMaxTimeoutUs) return decode_error::bad_field;
      at += 8;
    }
    has_extras = (flags & kCompactHasExtras) != 0;
  } else if (load_le<std::uint8_t>(p) == kCompactStreamMessage) {
    if (size < kCompactStreamMessageSize) return decode_error::truncated;
    const auto flags = load_le<std::uint8_t>(p + 1);
    if ((flags & ~kCompactHasExtras) != 0) return decode_error::bad_flags;
    h.kind = kind::stream_message;
    h.call_id = load_le<std::uint32_t>(p + 2);
    at = kCompactStreamMessageSize;
    has_extras = flags != 0;
  } else {
    if (size < kCompactResponseSize) return decode_error::truncated;
    const auto status = load_le<std::uint8_t>(p + 1);
    if ((status & ~(kStatusMask | kCompactHasExtras)) != 0 || (status & kStatusMask) > kMaxStatus) {
      return decode_error::bad_status;
    }
    h.kind = kind::response;
    h.status = static_cast<status_code>(status & kStatusMask);
    h.call_id = load_le<std::uint32_t>(p + 2);
    at = kCompactResponseSize;
    has_extras = (status & kCompactHasExtras) != 0;
  }
  if (has_extras) {
    if (size < at + 4) return decode_error::truncated;
    h.extras_length = load_le<std::uint32_t>(p + at);
    // One encoding per header: no extras is said by the flag, never by a zero length.
    if (h.extras_length == 0) return decode_error::bad_field;
    at += 4;
    if (h.extras_length > size - at) return decode_error::length_mismatch;
  }
  const std::size_t payload = size - at - h.extras_length;
  if (payload > std::numeric_limits<std::uint32_t>::max()) return decode_error::length_mismatch;
  h.payload_length = static_cast<std::uint32_t>(payload);
  v.extras = message.subspan(at, h.extras_length);
  v.payload = message.subspan(at + h.extras_length, payload);
  return decode_error::none;
}

bool is_compact(std::span<const std::byte> message) noexcept {
  if (message.empty()) return false;
  const auto tag = load_le<std::uint8_t>(message.data());
  return tag == kCompactRequest || tag == kCompactResponse || tag == kCompactStreamMessage;
}

}  // namespace

view decode_any(std::span<const std::byte> message, decode_error& err) noexcept {
  view v;
  err = decode_error::none;
  if (is_compact(message)) {
    err = decode_compact(message, v);
    return v;
  }
  if (message.size() < kHeaderSize) {
    err = decode_error::truncated;
    return v;
  }
  const std::byte* p = message.data();
  if (load_le<std::uint16_t>(p + kOffMagic) != kMagic) {
    err = decode_error::bad_magic;
    return v;
  }
  if (load_le<std::uint8_t>(p + kOffVersion) != kVersion) {
    err = decode_error::bad_version;
    return v;
  }
  header& h = v.header;
  const auto raw_kind = load_le<std::uint8_t>(p + kOffKind);
  // Requests, responses and stream messages travel only in compact form.
  if (raw_kind <= static_cast<std::uint8_t>(kind::response) ||
      raw_kind == static_cast<std::uint8_t>(kind::stream_message) || raw_kind > kLastKind) {
    err = decode_error::bad_kind;
    return v;
  }
  h.kind = static_cast<kind>(raw_kind);
  h.flags = load_le<std::uint8_t>(p + kOffFlags);
  const auto raw_status = load_le<std::uint8_t>(p + kOffStatus);
  h.call_id = load_le<std::uint32_t>(p + kOffCallId);
  h.method_id = load_le<std::uint32_t>(p + kOffMethodId);
  h.timeout_us = load_le<std::uint64_t>(p + kOffTimeout);
  h.extras_length = load_le<std::uint32_t>(p + kOffExtras);
  h.payload_length = load_le<std::uint32_t>(p + kOffPayload);

  if ((h.flags & ~kKnownFlags) != 0) {
    err = decode_error::bad_flags;
    return v;
  }
  if (load_le<std::uint16_t>(p + kOffReserved) != 0) {
    err = decode_error::bad_field;
    return v;
  }
  err = check_fields(h, raw_status);
  if (err != decode_error::none) return v;
  h.status = static_cast<status_code>(raw_status);
  // 64-bit sum of two 32-bit lengths cannot overflow.
  const std::uint64_t total = std::uint64_t{kHeaderSize} + h.extras_length + h.payload_length;
  if (total != message.size()) {
    err = decode_error::length_mismatch;
    return v;
  }
  v.extras = message.subspan(kHeaderSize, h.extras_length);
  v.payload = message.subspan(kHeaderSize + h.extras_length, h.payload_length);
  return v;
}

std::array<std::byte, kHeartbeatSize> encode_heartbeat(kind k, std::uint64_t value,
                                                       std::uint64_t domain) noexcept {
  header h;
  h.kind = k;
  h.timeout_us = value;
  h.payload_length = kHeartbeatDomainSize;
  std::array<std::byte, kHeartbeatSize> out{};
  encode_full(h, out.data());
  store_le<std::uint64_t>(out.data() + kHeaderSize, domain);
  return out;
}

std::uint64_t heartbeat_domain(const view& v) noexcept {
  static_assert(kHeartbeatDomainSize == sizeof(std::uint64_t));
  return v.payload.size() == kHeartbeatDomainSize ? load_le<std::uint64_t>(v.payload.data()) : 0;
}

}  // namespace rdmarpc::frame
