#pragma once
// message_parser: a message type's own parser of protobuf's wire format, written by the code
// generator for plain message types (only singular scalar, enum, string and bytes fields; see
// docs/generated-api.md) and used by unary calls to parse requests and replies. libprotobuf's
// generic parse sets up a parse context and goes through half a dozen calls into the library for
// a message of one field; a generated parser is one call that reads the fields in place.
// It never decides alone what protobuf would decide otherwise: anything it does not handle itself
// (a message of another type, an unknown field, another wire type, a malformed or truncated field,
// a proto3 string that is not UTF-8) makes it hand the whole message to protobuf's parser, whose
// verdict and result it returns. Such a message costs the parser's start plus protobuf's parse.
// protobuf_wire::wire_reader and its helpers are what generated parsers call. Layer: rpc.
// Threading: none of its own.

#include <google/protobuf/message_lite.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace rdmarpc {

// Clears `into` and parses `bytes` into it (a message of the parser's type); false when protobuf's
// ParsePartialFromArray would return false.
using message_parser = bool (*)(google::protobuf::MessageLite& into, std::span<const std::byte> bytes);

namespace protobuf_wire {

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points past
// U+10FFFF), what protobuf requires of a proto3 string field.
bool valid_utf8(std::string_view s) noexcept;

// The largest message a generated parser reads itself; protobuf's parser takes larger ones (its
// limits on lengths near 2 GiB are then its own).
inline constexpr std::size_t kMaxParsedBytes = std::size_t{1} << 30;

// protobuf's own parse of the whole message, for what a generated parser does not handle itself.
inline bool protobuf_parse(google::protobuf::MessageLite& into, std::span<const std::byte> bytes) {
  return bytes.size() <= static_cast<std::size_t>(INT_MAX) &&
         into.ParsePartialFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// Reads one message's fields front to back. Every read returns false, and reads nothing more,
// when the field is malformed or runs past the end.
class wire_reader {
 public:
  explicit wire_reader(std::span<const std::byte> bytes) noexcept
      : p_(reinterpret_cast<const std::uint8_t*>(bytes.data())), end_(p_ + bytes.size()) {}

  bool at_end() const noexcept { return p_ == end_; }

  // The next field's tag (field number << 3 | wire type), or 0 (no valid tag) when it is malformed,
  // past 32 bits or longer than 5 bytes (such oddities are left to protobuf's parser).
  std::uint64_t tag() noexcept {
    if (p_ != end_ && *p_ < 0x80) return *p_++;  // field numbers 1-15: one byte
    std::uint64_t t = 0;
    return read_varint(t, 5) && t <= UINT32_MAX ? t : 0;
  }

  // A varint field's value (at most 10 bytes; bits past 64 dropped, as protobuf does).
  bool varint(std::uint64_t& v) noexcept { return read_varint(v, 10); }

  template <typename T>
  bool fixed(T& v) noexcept {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8);
    if (static_cast<std::size_t>(end_ - p_) < sizeof(T)) return false;
    std::uint64_t u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) u |= std::uint64_t{p_[i]} << (8 * i);  // little-endian
    p_ += sizeof(T);
    if constexpr (sizeof(T) == 4) {
      const auto u32 = static_cast<std::uint32_t>(u);
      std::memcpy(&v, &u32, 4);
    } else {
      std::memcpy(&v, &u, 8);
    }
    return true;
  }

  // A string or bytes field's value, into `out` (whose memory is kept). Its length is read as
  // protobuf reads one: at most 5 bytes.
  bool bytes(std::string& out) {
    std::uint64_t n = 0;
    if (!read_varint(n, 5) || n > static_cast<std::uint64_t>(end_ - p_)) return false;
    out.assign(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(n));
    p_ += n;
    return true;
  }

 private:
  bool read_varint(std::uint64_t& v, int max_bytes) noexcept {
    v = 0;
    for (int i = 0; i < max_bytes && p_ != end_; ++i) {
      const std::uint8_t b = *p_++;
      v |= std::uint64_t{b & 0x7fu} << (7 * i);  // (the 10th byte's bits past 64 shift out)
      if (b < 0x80) return true;
    }
    return false;
  }

  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

inline std::int32_t zigzag32(std::uint64_t v) noexcept {
  const auto u = static_cast<std::uint32_t>(v);
  return static_cast<std::int32_t>((u >> 1) ^ (~(u & 1) + 1));
}

inline std::int64_t zigzag64(std::uint64_t v) noexcept {
  return static_cast<std::int64_t>((v >> 1) ^ (~(v & 1) + 1));
}

}  // namespace protobuf_wire
}  // namespace rdmarpc
