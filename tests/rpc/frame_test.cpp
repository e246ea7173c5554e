// Frame codec: round trips, the exact byte layout, and rejection of every kind of malformed input.
#include "rpc/frame.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <tuple>
#include <vector>

namespace frame = rdmarpc::frame;
using rdmarpc::status_code;

namespace {

std::vector<std::byte> make_message(const frame::header& h, std::size_t extras, std::size_t payload) {
  const std::size_t head = frame::header_size(h);
  std::vector<std::byte> msg(head + extras + payload);
  CHECK(frame::encode_header(h, msg) == head);
  for (std::size_t i = 0; i < extras; ++i) msg[head + i] = std::byte{0xE0};
  for (std::size_t i = 0; i < payload; ++i) msg[head + extras + i] = static_cast<std::byte>(i);
  return msg;
}

// A frame with a full header (every kind but request, response and stream_message): a stream_open.
frame::header full_header(std::uint32_t extras) {
  frame::header h;
  h.kind = frame::kind::stream_open;
  h.flags = frame::kFlagHasTimeout;
  h.call_id = 0x01020304;
  h.method_id = 0xA1B2C3D4;
  h.timeout_us = 1500000;
  h.extras_length = extras;
  return h;
}

frame::header request_header(std::uint32_t extras, std::uint32_t payload) {
  frame::header h;
  h.kind = frame::kind::request;
  h.flags = frame::kFlagHasTimeout;
  h.call_id = 0x01020304;
  h.method_id = 0xA1B2C3D4;
  h.timeout_us = 1500000;
  h.extras_length = extras;
  h.payload_length = payload;
  return h;
}

frame::decode_error decode_error_of(const std::vector<std::byte>& msg) {
  frame::decode_error err{};
  (void)frame::decode(msg, err);
  return err;
}

}  // namespace

TEST_CASE("frame: request round trip keeps every field and splits extras from payload", "[frame]") {
  const auto h = request_header(3, 10);
  const auto msg = make_message(h, 3, 10);
  frame::decode_error err{};
  const auto v = frame::decode(msg, err);
  REQUIRE(err == frame::decode_error::none);
  CHECK(v.header.kind == frame::kind::request);
  CHECK(v.header.has_timeout());
  CHECK(v.header.call_id == 0x01020304u);
  CHECK(v.header.method_id == 0xA1B2C3D4u);
  CHECK(v.header.timeout_us == 1500000u);
  REQUIRE(v.extras.size() == 3);
  CHECK(v.extras.data() == msg.data() + frame::kMaxCompactHeaderSize);
  REQUIRE(v.payload.size() == 10);
  CHECK(v.payload[9] == std::byte{9});
  CHECK(v.header.payload_length == 10);
}

TEST_CASE("frame: compact headers are little-endian at the documented offsets", "[frame]") {
  std::vector<std::byte> out(frame::kMaxCompactHeaderSize);
  SECTION("a request with a timeout and extras") {
    REQUIRE(frame::encode_header(request_header(0x11223344, 0x55667788), out) == 22);
    const unsigned char expected[22] = {
        0xC1, 0x81,                                      // tag, flags (HAS_EXTRAS | HAS_TIMEOUT)
        0x04, 0x03, 0x02, 0x01,                          // call id
        0xD4, 0xC3, 0xB2, 0xA1,                          // method id
        0x60, 0xE3, 0x16, 0x00, 0x00, 0x00, 0x00, 0x00,  // timeout_us = 1500000
        0x44, 0x33, 0x22, 0x11,                          // extras length
    };
    CHECK(std::memcmp(out.data(), expected, sizeof expected) == 0);
  }
  SECTION("a bare request: what a call without deadline or metadata sends") {
    auto h = request_header(0, 66);
    h.flags = 0;
    h.timeout_us = 0;
    REQUIRE(frame::header_size(h) == frame::kCompactRequestSize);
    REQUIRE(frame::encode_header(h, out) == 10);
    const unsigned char expected[10] = {0xC1, 0x00, 0x04, 0x03, 0x02, 0x01, 0xD4, 0xC3, 0xB2, 0xA1};
    CHECK(std::memcmp(out.data(), expected, sizeof expected) == 0);
  }
  SECTION("responses, with and without extras") {
    frame::header r;
    r.kind = frame::kind::response;
    r.call_id = 0x01020304;
    REQUIRE(frame::encode_header(r, out) == frame::kCompactResponseSize);
    const unsigned char ok[6] = {0xC2, 0x00, 0x04, 0x03, 0x02, 0x01};
    CHECK(std::memcmp(out.data(), ok, sizeof ok) == 0);
    r.status = status_code::unauthenticated;
    r.extras_length = 0x11223344;
    REQUIRE(frame::encode_header(r, out) == 10);
    const unsigned char failed[10] = {0xC2, 0x90, 0x04, 0x03, 0x02, 0x01, 0x44, 0x33, 0x22, 0x11};
    CHECK(std::memcmp(out.data(), failed, sizeof failed) == 0);
  }
}

TEST_CASE("frame: a compact stream message header is tag, flags, call id [, extras length]",
          "[frame][stream]") {
  std::vector<std::byte> out(frame::kMaxCompactHeaderSize);
  frame::header m;
  m.kind = frame::kind::stream_message;
  m.call_id = 0x01020304;
  REQUIRE(frame::encode_header(m, out) == frame::kCompactStreamMessageSize);
  const unsigned char bare[6] = {0xC5, 0x00, 0x04, 0x03, 0x02, 0x01};
  CHECK(std::memcmp(out.data(), bare, sizeof bare) == 0);
  m.extras_length = 0x11223344;
  REQUIRE(frame::encode_header(m, out) == 10);
  const unsigned char with_extras[10] = {0xC5, 0x80, 0x04, 0x03, 0x02, 0x01, 0x44, 0x33, 0x22, 0x11};
  CHECK(std::memcmp(out.data(), with_extras, sizeof with_extras) == 0);
}

TEST_CASE("frame: full header layout is little-endian at the documented offsets", "[frame]") {
  auto h = full_header(0x11223344);
  h.payload_length = 0x55667788;
  const auto bytes = frame::encode_full_header(h);
  const unsigned char expected[frame::kHeaderSize] = {
      0x52, 0x52, 0x02, 0x04, 0x01, 0x00, 0x00, 0x00,  // magic, version, kind, flags, status, reserved
      0x04, 0x03, 0x02, 0x01,                          // call id
      0xD4, 0xC3, 0xB2, 0xA1,                          // method id
      0x60, 0xE3, 0x16, 0x00, 0x00, 0x00, 0x00, 0x00,  // timeout_us = 1500000
      0x44, 0x33, 0x22, 0x11,                          // extras length
      0x88, 0x77, 0x66, 0x55,                          // payload length
  };
  CHECK(std::memcmp(bytes.data(), expected, frame::kHeaderSize) == 0);
  std::vector<std::byte> out(frame::kHeaderSize);
  REQUIRE(frame::encode_header(h, out) == frame::kHeaderSize);
  CHECK(std::memcmp(out.data(), expected, frame::kHeaderSize) == 0);
}

TEST_CASE("frame: a status outside 0..16 goes out as UNKNOWN, never misread or refused", "[frame]") {
  // A response's compact header, with and without extras (whose flag shares the status byte), and
  // the full header of a stream's trailers.
  for (const auto& [kind, raw, extras] : {std::tuple{frame::kind::response, 17, 0u},
                                          {frame::kind::response, 0x85, 0u},
                                          {frame::kind::response, 0x85, 5u},
                                          {frame::kind::response, 255, 5u},
                                          {frame::kind::trailers, 17, 0u},
                                          {frame::kind::trailers, 255, 5u}}) {
    frame::header h;
    h.kind = kind;
    h.status = static_cast<status_code>(raw);  // a handler's cast of its own number
    h.call_id = 7;
    h.extras_length = extras;
    const std::size_t payload = kind == frame::kind::response ? 3 : 0;
    const auto msg = make_message(h, extras, payload);
    frame::decode_error err{};
    const auto v = frame::decode(msg, err);
    REQUIRE(err == frame::decode_error::none);
    CHECK(v.header.status == status_code::unknown);
    CHECK(v.extras.size() == extras);
    CHECK(v.payload.size() == payload);
  }
  CHECK(frame::status_byte(status_code::unauthenticated) == 16);
  CHECK(frame::status_byte(status_code::ok) == 0);
}

TEST_CASE("frame: response and cancel round trip - empty payload allowed", "[frame]") {
  frame::header r;
  r.kind = frame::kind::response;
  r.status = status_code::not_found;
  r.call_id = 7;
  r.extras_length = 5;
  auto msg = make_message(r, 5, 0);
  frame::decode_error err{};
  auto v = frame::decode(msg, err);
  REQUIRE(err == frame::decode_error::none);
  CHECK(v.header.status == status_code::not_found);
  CHECK(v.extras.size() == 5);
  CHECK(v.payload.empty());

  frame::header c;
  c.kind = frame::kind::cancel;
  c.call_id = 99;
  msg = make_message(c, 0, 0);
  v = frame::decode(msg, err);
  REQUIRE(err == frame::decode_error::none);
  CHECK(v.header.kind == frame::kind::cancel);
  CHECK(v.header.call_id == 99u);
}

TEST_CASE("frame: truncated input is rejected at every length below the header", "[frame]") {
  frame::header response;
  response.kind = frame::kind::response;
  response.extras_length = 1;
  frame::header message = response;
  message.kind = frame::kind::stream_message;
  for (const auto& h : {request_header(1, 0), response, message, full_header(0)}) {
    const auto msg = make_message(h, h.extras_length, 0);
    for (std::size_t n = 0; n < frame::header_size(h); ++n) {
      std::vector<std::byte> cut(msg.begin(), msg.begin() + static_cast<std::ptrdiff_t>(n));
      CHECK(decode_error_of(cut) == frame::decode_error::truncated);
    }
  }
}

TEST_CASE("frame: malformed compact headers are rejected with the right reason", "[frame]") {
  auto msg = make_message(request_header(2, 4), 2, 4);
  REQUIRE(decode_error_of(msg) == frame::decode_error::none);
  SECTION("unknown flag bit") {
    msg[1] = std::byte{0x83};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_flags);
  }
  SECTION("timeout beyond the maximum") {
    auto h = request_header(2, 4);
    h.timeout_us = frame::kMaxTimeoutUs + 1;
    msg = make_message(h, 2, 4);
    CHECK(decode_error_of(msg) == frame::decode_error::bad_field);
    h.timeout_us = frame::kMaxTimeoutUs;
    msg = make_message(h, 2, 4);
    CHECK(decode_error_of(msg) == frame::decode_error::none);
  }
  SECTION("extras longer than the message") {
    msg.resize(frame::kMaxCompactHeaderSize + 1);  // 2 bytes of extras announced, 1 left
    CHECK(decode_error_of(msg) == frame::decode_error::length_mismatch);
    msg[18] = msg[19] = msg[20] = msg[21] = std::byte{0xFF};  // extras_length 2^32 - 1
    CHECK(decode_error_of(msg) == frame::decode_error::length_mismatch);
  }
  SECTION("the extras flag with a zero length (no extras is said only one way)") {
    msg[18] = std::byte{0};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_field);
  }
  SECTION("the payload is what follows the extras, to the message's end") {
    msg.push_back(std::byte{0});
    frame::decode_error err{};
    CHECK(frame::decode(msg, err).payload.size() == 5);
    CHECK(err == frame::decode_error::none);
  }
  SECTION("a request or a response in a full header") {
    msg = make_message(full_header(0), 0, 0);
    for (auto k : {frame::kind::request, frame::kind::response}) {
      msg[3] = static_cast<std::byte>(k);
      CHECK(decode_error_of(msg) == frame::decode_error::bad_kind);
    }
  }
}

TEST_CASE("frame: malformed full headers are rejected with the right reason", "[frame]") {
  auto msg = make_message(full_header(2), 2, 0);
  REQUIRE(decode_error_of(msg) == frame::decode_error::none);

  SECTION("bad magic") {
    msg[0] = std::byte{0x00};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_magic);
  }
  SECTION("bad version") {
    msg[2] = std::byte{1};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_version);
  }
  SECTION("bad kind (0 and beyond the last)") {
    msg[3] = std::byte{0};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_kind);
    msg[3] = std::byte{frame::kLastKind + 1};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_kind);
    msg[3] = std::byte{0xFF};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_kind);
  }
  SECTION("unknown flag bit") {
    msg[4] = std::byte{0x81};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_flags);
  }
  SECTION("status set on a stream_open") {
    msg[5] = std::byte{1};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_status);
  }
  SECTION("reserved bytes set") {
    msg[7] = std::byte{1};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_field);
  }
  SECTION("timeout without the flag") {
    msg[4] = std::byte{0};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_field);
  }
  SECTION("timeout beyond the maximum") {
    auto h = full_header(2);
    h.timeout_us = frame::kMaxTimeoutUs + 1;
    msg = make_message(h, 2, 0);
    CHECK(decode_error_of(msg) == frame::decode_error::bad_field);
    h.timeout_us = frame::kMaxTimeoutUs;
    msg = make_message(h, 2, 0);
    CHECK(decode_error_of(msg) == frame::decode_error::none);
  }
  SECTION("lengths larger than the message") {
    msg.pop_back();
    CHECK(decode_error_of(msg) == frame::decode_error::length_mismatch);
  }
  SECTION("lengths smaller than the message (trailing bytes)") {
    msg.push_back(std::byte{0});
    CHECK(decode_error_of(msg) == frame::decode_error::length_mismatch);
  }
  SECTION("an extras length far beyond the message (the sum with the header does not wrap)") {
    msg = make_message(full_header(0xFFFFFFF0u), 0, 0x10);  // a 32-bit sum would wrap to 32 + 0x10 - 0x30
    CHECK(decode_error_of(msg) == frame::decode_error::length_mismatch);
    msg = make_message(full_header(0xFFFFFFFFu), 0, 0);
    CHECK(decode_error_of(msg) == frame::decode_error::length_mismatch);
  }
}

TEST_CASE("frame: kind-specific fields are validated", "[frame]") {
  SECTION("response with a status beyond UNAUTHENTICATED, or unknown bits in its status byte") {
    frame::header r;
    r.kind = frame::kind::response;
    auto msg = make_message(r, 0, 0);
    msg[1] = std::byte{17};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_status);
    for (unsigned bit : {0x20u, 0x40u}) {
      msg[1] = std::byte{static_cast<unsigned char>(1 | bit)};
      CHECK(decode_error_of(msg) == frame::decode_error::bad_status);
    }
    msg[1] = std::byte{16};
    CHECK(decode_error_of(msg) == frame::decode_error::none);
  }
  SECTION("a compact response has no room for flags, a method id or a timeout") {
    frame::header r;
    r.kind = frame::kind::response;
    r.flags = frame::kFlagHasTimeout;
    r.method_id = 5;
    r.timeout_us = 5;
    const auto msg = make_message(r, 0, 0);
    CHECK(msg.size() == frame::kCompactResponseSize);
    frame::decode_error err{};
    const auto v = frame::decode(msg, err);
    REQUIRE(err == frame::decode_error::none);
    CHECK((v.header.flags == 0 && v.header.method_id == 0 && v.header.timeout_us == 0));
  }
  SECTION("cancel carrying a body") {
    frame::header c;
    c.kind = frame::kind::cancel;
    c.payload_length = 1;
    CHECK(decode_error_of(make_message(c, 0, 1)) == frame::decode_error::bad_field);
    c.payload_length = 0;
    c.extras_length = 1;
    CHECK(decode_error_of(make_message(c, 1, 0)) == frame::decode_error::bad_field);
    c.extras_length = 0;
    c.status = status_code::cancelled;
    CHECK(decode_error_of(make_message(c, 0, 0)) == frame::decode_error::bad_status);
  }
}

TEST_CASE("frame: every decode error has a description", "[frame]") {
  for (int e = 0; e <= static_cast<int>(frame::decode_error::length_mismatch); ++e) {
    CHECK(std::strlen(frame::to_string(static_cast<frame::decode_error>(e))) > 0);
  }
}

namespace {
frame::header stream_header(frame::kind k) {
  frame::header h;
  h.kind = k;
  h.call_id = 7;
  return h;
}
}  // namespace

TEST_CASE("frame: stream kinds accept exactly the fields the wire format gives them", "[frame][stream]") {
  using k = frame::kind;
  SECTION("stream_open carries a method and a timeout and extras but no payload") {
    auto h = stream_header(k::stream_open);
    h.method_id = 99;
    h.flags = frame::kFlagHasTimeout;
    h.timeout_us = 1000;
    h.extras_length = 4;
    CHECK(decode_error_of(make_message(h, 4, 0)) == frame::decode_error::none);
    h.payload_length = 1;
    CHECK(decode_error_of(make_message(h, 4, 1)) == frame::decode_error::bad_field);
  }
  SECTION("stream_message (compact) carries a payload and extras, and has no room for anything else") {
    auto h = stream_header(k::stream_message);
    h.payload_length = 10;
    auto msg = make_message(h, 0, 10);
    CHECK(msg.size() == frame::kCompactStreamMessageSize + 10);
    frame::decode_error err{};
    auto v = frame::decode(msg, err);
    REQUIRE(err == frame::decode_error::none);
    CHECK((v.header.kind == k::stream_message && v.header.call_id == 7 && v.payload.size() == 10));
    auto ignored = h;  // fields a stream message has no room for are not encoded
    ignored.method_id = 1;
    ignored.status = status_code::aborted;
    ignored.flags = frame::kFlagHasTimeout;
    ignored.timeout_us = 5;
    CHECK(make_message(ignored, 0, 10) == msg);
    h.extras_length = 3;
    msg = make_message(h, 3, 10);
    v = frame::decode(msg, err);
    REQUIRE(err == frame::decode_error::none);
    CHECK((v.extras.size() == 3 && v.payload.size() == 10));
    for (unsigned flags : {0x01u, 0x40u, 0x81u}) {  // only HAS_EXTRAS is known
      msg[1] = std::byte{static_cast<unsigned char>(flags)};
      CHECK(decode_error_of(msg) == frame::decode_error::bad_flags);
    }
    msg = make_message(full_header(0), 0, 0);  // in a full header: malformed
    msg[3] = static_cast<std::byte>(k::stream_message);
    msg[4] = std::byte{0};
    CHECK(decode_error_of(msg) == frame::decode_error::bad_kind);
  }
  SECTION("half_close is bare") {
    auto h = stream_header(k::half_close);
    CHECK(decode_error_of(make_message(h, 0, 0)) == frame::decode_error::none);
    h.extras_length = 1;
    CHECK(decode_error_of(make_message(h, 1, 0)) == frame::decode_error::bad_field);
  }
  SECTION("trailers and reset carry a status and extras") {
    for (auto kind : {k::trailers, k::reset}) {
      auto h = stream_header(kind);
      h.status = status_code::unauthenticated;
      h.extras_length = 3;
      CHECK(decode_error_of(make_message(h, 3, 0)) == frame::decode_error::none);
      h.payload_length = 2;
      CHECK(decode_error_of(make_message(h, 3, 2)) == frame::decode_error::bad_field);
    }
  }
  SECTION("window_update and stream_headers carry a window up to 2^48 bytes") {
    for (auto kind : {k::window_update, k::stream_headers}) {
      auto h = stream_header(kind);
      h.method_id = 64;
      h.timeout_us = std::uint64_t{1} << 48;
      const auto msg = make_message(h, 0, 0);
      frame::decode_error err{};
      const auto v = frame::decode(msg, err);
      CHECK(err == frame::decode_error::none);
      CHECK(v.header.method_id == 64);
      CHECK(v.header.timeout_us == std::uint64_t{1} << 48);
      h.timeout_us += 1;
      CHECK(decode_error_of(make_message(h, 0, 0)) == frame::decode_error::bad_field);
    }
    auto h = stream_header(k::window_update);
    h.extras_length = 1;
    CHECK(decode_error_of(make_message(h, 1, 0)) == frame::decode_error::bad_field);
  }
}

TEST_CASE("frame: going_away belongs to the connection and carries nothing", "[frame]") {
  frame::header h;
  h.kind = frame::kind::going_away;
  frame::decode_error err{};
  const auto msg = make_message(h, 0, 0);
  const auto v = frame::decode(msg, err);
  REQUIRE(err == frame::decode_error::none);
  CHECK(v.header.kind == frame::kind::going_away);
  SECTION("a call id") {
    h.call_id = 1;
    CHECK(decode_error_of(make_message(h, 0, 0)) == frame::decode_error::bad_field);
  }
  SECTION("a value") {
    h.timeout_us = 1;
    CHECK(decode_error_of(make_message(h, 0, 0)) == frame::decode_error::bad_field);
  }
  SECTION("a payload") {
    h.payload_length = 4;
    CHECK(decode_error_of(make_message(h, 0, 4)) == frame::decode_error::bad_field);
  }
}

TEST_CASE("frame: ping and pong carry only an opaque 64-bit value and the sender's heartbeat domain",
          "[frame][heartbeat]") {
  for (auto kind : {frame::kind::ping, frame::kind::pong}) {
    frame::header h;
    h.kind = kind;
    h.timeout_us = ~std::uint64_t{0};  // any value: it is opaque, never a duration
    {
      const auto msg = make_message(h, 0, 0);
      frame::decode_error err{};
      const auto v = frame::decode(msg, err);
      REQUIRE(err == frame::decode_error::none);
      CHECK(v.header.kind == kind);
      CHECK(v.header.timeout_us == ~std::uint64_t{0});
      CHECK(frame::heartbeat_domain(v) == 0);  // an empty payload names no domain
    }
    {
      // What both sides send: the value, and the domain as an 8-byte little-endian payload.
      const auto built = frame::encode_heartbeat(kind, ~std::uint64_t{0}, 0x0102030405060708);
      REQUIRE(built.size() == frame::kHeaderSize + 8);
      frame::decode_error err{};
      const auto v = frame::decode(built, err);
      REQUIRE(err == frame::decode_error::none);
      CHECK(v.header.kind == kind);
      CHECK(v.header.timeout_us == ~std::uint64_t{0});
      CHECK(v.header.payload_length == 8);
      CHECK(std::to_integer<int>(built[frame::kHeaderSize]) == 0x08);
      CHECK(frame::heartbeat_domain(v) == 0x0102030405060708);
    }
    SECTION("a call id (heartbeats belong to the connection)") {
      h.call_id = 1;
      CHECK(decode_error_of(make_message(h, 0, 0)) == frame::decode_error::bad_field);
    }
    SECTION("a method id") {
      h.method_id = 1;
      CHECK(decode_error_of(make_message(h, 0, 0)) == frame::decode_error::bad_field);
    }
    SECTION("a status") {
      h.status = status_code::unavailable;
      CHECK(decode_error_of(make_message(h, 0, 0)) == frame::decode_error::bad_status);
    }
    SECTION("a flag") {
      h.flags = frame::kFlagHasTimeout;
      CHECK(decode_error_of(make_message(h, 0, 0)) == frame::decode_error::bad_flags);
    }
    SECTION("extras") {
      h.extras_length = 1;
      CHECK(decode_error_of(make_message(h, 1, 0)) == frame::decode_error::bad_field);
    }
    SECTION("a payload that is not 8 bytes") {
      for (std::uint32_t length : {1u, 7u, 9u, 16u}) {
        h.payload_length = length;
        CHECK(decode_error_of(make_message(h, 0, length)) == frame::decode_error::bad_field);
      }
    }
  }
}

// decode's shortcut must find exactly what decode_any finds, field by field, every error included.
// Full headers first: a request or a response in one is malformed.
TEST_CASE("frame: decode agrees with decode_any on every kind of full header", "[frame]") {
  std::size_t compared = 0, valid_unary = 0, valid_other = 0;
  std::vector<std::byte> msg;
  for (unsigned kind = 0; kind <= 15; ++kind) {
    for (unsigned flags : {0u, 1u, 2u, 0x81u}) {
      for (unsigned status : {0u, 1u, 16u, 17u, 255u}) {
        for (std::uint64_t timeout :
             {std::uint64_t{0}, std::uint64_t{1}, frame::kMaxTimeoutUs, frame::kMaxTimeoutUs + 1,
              (std::uint64_t{1} << 48) + 1, ~std::uint64_t{0}}) {
          for (std::uint32_t method : {0u, 0xA1B2C3D4u}) {
            for (std::uint32_t call : {0u, 7u, 0x80000007u}) {
              for (int variant = 0; variant < 9; ++variant) {
                // Lengths 0: nothing; 1: a payload; 2: extras and payload; then extras and payload
                // with 3: one byte too many; 4: one too few; 5: bad magic; 6: bad version; 7, 8: a
                // bit in either reserved byte.
                const std::uint32_t extras = variant >= 2 ? 3 : 0, payload = variant >= 1 ? 8 : 0;
                msg.assign(frame::kHeaderSize + extras + payload + (variant == 3 ? 1 : 0), std::byte{0x5A});
                if (variant == 4) msg.pop_back();
                std::byte* p = msg.data();
                p[0] = p[1] = std::byte{0x52};
                p[2] = std::byte{static_cast<unsigned char>(variant == 6 ? 1 : 2)};
                p[3] = std::byte{static_cast<unsigned char>(kind)};
                p[4] = std::byte{static_cast<unsigned char>(flags)};
                p[5] = std::byte{static_cast<unsigned char>(status)};
                p[6] = std::byte{static_cast<unsigned char>(variant == 8 ? 0x10 : 0)};
                p[7] = std::byte{static_cast<unsigned char>(variant == 7 ? 1 : 0)};
                if (variant == 5) p[1] = std::byte{0x53};
                for (int i = 0; i < 4; ++i) {
                  p[8 + i] = std::byte{static_cast<unsigned char>(call >> (8 * i))};
                  p[12 + i] = std::byte{static_cast<unsigned char>(method >> (8 * i))};
                  p[24 + i] = std::byte{static_cast<unsigned char>(extras >> (8 * i))};
                  p[28 + i] = std::byte{static_cast<unsigned char>(payload >> (8 * i))};
                }
                for (int i = 0; i < 8; ++i)
                  p[16 + i] = std::byte{static_cast<unsigned char>(timeout >> (8 * i))};
                frame::decode_error fast_err{}, any_err{};
                const auto fast = frame::decode(msg, fast_err);
                const auto any = frame::decode_any(msg, any_err);
                ++compared;
                REQUIRE(fast_err == any_err);
                if (kind == 1 || kind == 2 || kind == 5) REQUIRE(any_err != frame::decode_error::none);
                if (any_err != frame::decode_error::none) continue;
                ++(kind == 1 || kind == 2 || kind == 5 ? valid_unary : valid_other);
                CHECK(fast.header.kind == any.header.kind);
                CHECK(fast.header.flags == any.header.flags);
                CHECK(fast.header.status == any.header.status);
                CHECK(fast.header.call_id == any.header.call_id);
                CHECK(fast.header.method_id == any.header.method_id);
                CHECK(fast.header.timeout_us == any.header.timeout_us);
                CHECK(fast.header.extras_length == any.header.extras_length);
                CHECK(fast.header.payload_length == any.header.payload_length);
                CHECK(fast.extras.data() == any.extras.data());
                CHECK(fast.extras.size() == any.extras.size());
                CHECK(fast.payload.data() == any.payload.data());
                CHECK(fast.payload.size() == any.payload.size());
              }
            }
          }
        }
      }
    }
  }
  CHECK(compared == 16 * 4 * 5 * 6 * 2 * 3 * 9);
  CHECK(valid_unary == 0);
  CHECK(valid_other > 20);
}

TEST_CASE("frame: decode agrees with decode_any on compact headers", "[frame]") {
  std::size_t valid = 0, invalid = 0;
  std::vector<std::byte> msg;
  for (unsigned tag : {0xC1u, 0xC2u, 0xC5u}) {
    for (unsigned second = 0; second <= 0xFF; ++second) {  // flags, or status and the extras bit
      for (std::uint64_t timeout : {std::uint64_t{0}, frame::kMaxTimeoutUs, frame::kMaxTimeoutUs + 1}) {
        for (std::uint32_t extras : {0u, 3u, 100u}) {
          for (std::size_t rest : {0u, 3u, 11u}) {  // bytes after the fixed fields and the timeout
            const std::size_t fixed = tag == 0xC1u ? frame::kCompactRequestSize : frame::kCompactResponseSize;
            static_assert(frame::kCompactStreamMessageSize == frame::kCompactResponseSize);
            const bool has_timeout = tag == 0xC1u && (second & frame::kFlagHasTimeout) != 0;
            const bool has_extras = (second & frame::kCompactHasExtras) != 0;
            msg.assign(fixed + (has_timeout ? 8 : 0) + (has_extras ? 4 : 0) + rest, std::byte{0x5A});
            std::byte* p = msg.data();
            p[0] = std::byte{static_cast<unsigned char>(tag)};
            p[1] = std::byte{static_cast<unsigned char>(second)};
            std::size_t at = fixed;
            if (has_timeout) {
              for (int i = 0; i < 8; ++i)
                p[at + i] = std::byte{static_cast<unsigned char>(timeout >> (8 * i))};
              at += 8;
            }
            if (has_extras) {
              for (int i = 0; i < 4; ++i)
                p[at + i] = std::byte{static_cast<unsigned char>(extras >> (8 * i))};
            }
            frame::decode_error fast_err{}, any_err{};
            const auto fast = frame::decode(msg, fast_err);
            const auto any = frame::decode_any(msg, any_err);
            REQUIRE(fast_err == any_err);
            if (any_err != frame::decode_error::none) {
              ++invalid;
              continue;
            }
            ++valid;
            CHECK(static_cast<unsigned>(fast.header.kind) == (tag & 0x0Fu));
            CHECK(fast.header.status == any.header.status);
            CHECK(fast.header.timeout_us == any.header.timeout_us);
            CHECK(fast.header.extras_length == (has_extras ? extras : 0));
            CHECK(fast.header.call_id == any.header.call_id);
            CHECK(fast.header.method_id == any.header.method_id);
            CHECK(fast.header.payload_length == any.header.payload_length);
            CHECK(fast.extras.size() == any.extras.size());
            if (!any.extras.empty()) CHECK(fast.extras.data() == any.extras.data());
            CHECK(fast.payload.data() == any.payload.data());
            CHECK(fast.payload.data() + fast.payload.size() == msg.data() + msg.size());
            // What decoded encodes back to the same header bytes.
            std::vector<std::byte> again(frame::header_size(fast.header));
            CHECK(frame::encode_header(fast.header, again) == at + (has_extras ? 4 : 0));
            CHECK(std::memcmp(again.data(), msg.data(), again.size()) == 0);
          }
        }
      }
    }
  }
  CHECK(valid > 100);
  CHECK(invalid > 100);
}
