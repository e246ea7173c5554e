// Unit tests of the rdma wire format (transport/rdma/wire.hpp): immediate data, fragmentation,
// reassembly and the rdma_cm handshake. Pure: no I/O, no device.
#include "transport/rdma/wire.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <set>
#include <span>
#include <vector>

#include "transport/error.hpp"

namespace wire = rdmarpc::transport::rdma::wire;
using rdmarpc::transport::errc;
using wire::fragment;
using outcome = wire::reassembler::outcome;

namespace {

std::vector<std::byte> pattern(std::size_t n, unsigned seed = 0) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return v;
}

}  // namespace

// --- immediate data ------------------------------------------------------------------------------
TEST_CASE("imm: every field combination round-trips", "[wire][imm]") {
  for (std::uint32_t credits : {0u, 1u, 7u, 0x1234u, 0xffffu}) {
    for (auto kind : {fragment::whole, fragment::first, fragment::middle, fragment::last}) {
      const wire::imm_fields in{static_cast<std::uint16_t>(credits), kind, false};
      auto out = wire::decode_imm(wire::encode_imm(in));
      REQUIRE(out.has_value());
      CHECK(*out == in);
    }
    for (bool goodbye : {false, true}) {
      const wire::imm_fields update{static_cast<std::uint16_t>(credits), fragment::whole, true, goodbye};
      auto out = wire::decode_imm(wire::encode_imm(update));
      REQUIRE(out.has_value());
      CHECK(*out == update);
    }
  }
}

TEST_CASE("imm: distinct fields give distinct values", "[wire][imm]") {
  CHECK(wire::encode_imm({1, fragment::whole, false}) != wire::encode_imm({0, fragment::whole, false}));
  CHECK(wire::encode_imm({0, fragment::first, false}) != wire::encode_imm({0, fragment::last, false}));
  CHECK(wire::encode_imm({0, fragment::whole, true}) != wire::encode_imm({0, fragment::whole, false}));
  CHECK(wire::encode_imm({0, fragment::whole, true, true}) != wire::encode_imm({0, fragment::whole, true}));
}

TEST_CASE("imm: receive reserved bits set / expect protocol_error", "[wire][imm]") {
  const std::uint32_t valid = wire::encode_imm({5, fragment::middle, false});
  for (unsigned bit = 20; bit < 32; ++bit) {
    auto out = wire::decode_imm(valid | (1u << bit));
    REQUIRE(out.has_error());
    CHECK(out.error() == errc::protocol_error);
  }
}

TEST_CASE("imm: receive credit-only claiming a fragment kind / expect protocol_error", "[wire][imm]") {
  for (auto kind : {fragment::first, fragment::middle, fragment::last}) {
    const std::uint32_t bad =
        wire::encode_imm({3, kind, false}) | wire::encode_imm({0, fragment::whole, true});
    auto out = wire::decode_imm(bad);
    REQUIRE(out.has_error());
    CHECK(out.error() == errc::protocol_error);
  }
}

TEST_CASE("imm: receive goodbye on a data fragment / expect protocol_error", "[wire][imm]") {
  for (auto kind : {fragment::whole, fragment::first, fragment::middle, fragment::last}) {
    const std::uint32_t bad =
        wire::encode_imm({3, kind, false}) | wire::encode_imm({0, fragment::whole, false, true});
    auto out = wire::decode_imm(bad);
    REQUIRE(out.has_error());
    CHECK(out.error() == errc::protocol_error);
  }
}

// --- fragmentation -------------------------------------------------------------------------------
TEST_CASE("fragment_count: boundary sizes", "[wire][fragment]") {
  constexpr std::size_t slot = 8192;
  CHECK(wire::fragment_count(0, slot) == 1);  // an empty message still takes a slot
  CHECK(wire::fragment_count(1, slot) == 1);
  CHECK(wire::fragment_count(slot - 1, slot) == 1);
  CHECK(wire::fragment_count(slot, slot) == 1);
  CHECK(wire::fragment_count(slot + 1, slot) == 2);
  CHECK(wire::fragment_count(2 * slot, slot) == 2);
  CHECK(wire::fragment_count(std::size_t{16} << 20, slot) == 2048);
  CHECK(wire::fragment_count((std::size_t{16} << 20) + 1, slot) == 2049);
  CHECK(wire::fragment_count(100, 64) == 2);
}

TEST_CASE("fragment_kind: whole, then first/middle/last", "[wire][fragment]") {
  CHECK(wire::fragment_kind(0, 1) == fragment::whole);
  CHECK(wire::fragment_kind(0, 2) == fragment::first);
  CHECK(wire::fragment_kind(1, 2) == fragment::last);
  CHECK(wire::fragment_kind(0, 5) == fragment::first);
  for (std::size_t i = 1; i < 4; ++i) CHECK(wire::fragment_kind(i, 5) == fragment::middle);
  CHECK(wire::fragment_kind(4, 5) == fragment::last);
}

// Splits `message` exactly as a sender does and feeds the pieces to a reassembler.
TEST_CASE("reassembler: split then reassemble gives the original bytes", "[wire][reassembler]") {
  constexpr std::size_t slot = 64;
  for (std::size_t size :
       {std::size_t{0}, std::size_t{1}, slot - 1, slot, slot + 1, 3 * slot, 10 * slot + 7}) {
    const auto message = pattern(size, static_cast<unsigned>(size));
    wire::reassembler r(1 << 20, slot);
    const std::size_t count = wire::fragment_count(size, slot);
    std::vector<std::byte> got;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t offset = i * slot;
      const std::size_t len = std::min(slot, size - std::min(size, offset));
      const auto piece = std::span<const std::byte>(message).subspan(std::min(offset, size), len);
      const auto res = r.feed(wire::fragment_kind(i, count), piece);
      if (count == 1) {
        REQUIRE(res == outcome::whole);
        got.assign(piece.begin(), piece.end());
      } else if (i + 1 < count) {
        REQUIRE(res == outcome::need_more);
        REQUIRE(r.in_progress());
      } else {
        REQUIRE(res == outcome::complete);
        REQUIRE_FALSE(r.in_progress());
        got = r.take();
      }
    }
    CHECK(got == message);
  }
}

TEST_CASE("reassembler: 16 MiB message at max size completes, one byte more is a protocol_error",
          "[wire][reassembler]") {
  constexpr std::size_t slot = 8192, max = std::size_t{16} << 20;
  const std::vector<std::byte> chunk(slot, std::byte{0x5a});
  wire::reassembler r(max, slot);
  const std::size_t count = wire::fragment_count(max, slot);
  for (std::size_t i = 0; i + 1 < count; ++i)
    REQUIRE(r.feed(wire::fragment_kind(i, count), chunk) == outcome::need_more);
  REQUIRE(r.feed(fragment::last, chunk) == outcome::complete);
  CHECK(r.take().size() == max);

  // Same again, but the last fragment carries one byte too many.
  for (std::size_t i = 0; i + 1 < count; ++i)
    REQUIRE(r.feed(wire::fragment_kind(i, count), chunk) == outcome::need_more);
  std::vector<std::byte> too_long(slot + 1, std::byte{1});
  CHECK(r.feed(fragment::last, too_long) == outcome::protocol_error);
  CHECK_FALSE(r.in_progress());
}

TEST_CASE("reassembler: receive whole larger than max / expect protocol_error", "[wire][reassembler]") {
  wire::reassembler r(10, 16);
  CHECK(r.feed(fragment::whole, pattern(10)) == outcome::whole);
  CHECK(r.feed(fragment::whole, pattern(11)) == outcome::protocol_error);
  wire::reassembler r2(10, 11);
  CHECK(r2.feed(fragment::first, pattern(11)) == outcome::protocol_error);
  wire::reassembler r3(10, 6);
  REQUIRE(r3.feed(fragment::first, pattern(6)) == outcome::need_more);
  CHECK(r3.feed(fragment::last, pattern(5)) == outcome::protocol_error);
}

TEST_CASE("reassembler: zero-length messages", "[wire][reassembler]") {
  wire::reassembler r(0, 64);
  CHECK(r.feed(fragment::whole, {}) == outcome::whole);
  CHECK(r.feed(fragment::whole, pattern(1)) == outcome::protocol_error);
}

TEST_CASE("reassembler: out-of-order kinds / expect protocol_error", "[wire][reassembler]") {
  const auto bytes = pattern(8);
  SECTION("middle with nothing started") {
    wire::reassembler r(1024, 8);
    CHECK(r.feed(fragment::middle, bytes) == outcome::protocol_error);
  }
  SECTION("last with nothing started") {
    wire::reassembler r(1024, 8);
    CHECK(r.feed(fragment::last, bytes) == outcome::protocol_error);
  }
  SECTION("first while a message is in progress") {
    wire::reassembler r(1024, 8);
    REQUIRE(r.feed(fragment::first, bytes) == outcome::need_more);
    CHECK(r.feed(fragment::first, bytes) == outcome::protocol_error);
  }
  SECTION("whole while a message is in progress") {
    wire::reassembler r(1024, 8);
    REQUIRE(r.feed(fragment::first, bytes) == outcome::need_more);
    REQUIRE(r.feed(fragment::middle, bytes) == outcome::need_more);
    CHECK(r.feed(fragment::whole, bytes) == outcome::protocol_error);
  }
  SECTION("last after a completed message") {
    wire::reassembler r(1024, 8);
    REQUIRE(r.feed(fragment::first, bytes) == outcome::need_more);
    REQUIRE(r.feed(fragment::last, bytes) == outcome::complete);
    CHECK(r.take().size() == 16);
    CHECK(r.feed(fragment::last, bytes) == outcome::protocol_error);
  }
  SECTION("a kind outside the enum") {
    wire::reassembler r(1024, 8);
    CHECK(r.feed(static_cast<fragment>(7), bytes) == outcome::protocol_error);
  }
}

TEST_CASE("reassembler: usable again after a complete message", "[wire][reassembler]") {
  wire::reassembler r(1024, 3);
  REQUIRE(r.feed(fragment::first, pattern(3, 1)) == outcome::need_more);
  REQUIRE(r.feed(fragment::last, pattern(2, 2)) == outcome::complete);
  auto first = r.take();
  REQUIRE(r.feed(fragment::first, pattern(3, 3)) == outcome::need_more);
  REQUIRE(r.feed(fragment::middle, pattern(3, 4)) == outcome::need_more);
  REQUIRE(r.feed(fragment::last, pattern(3, 5)) == outcome::complete);
  auto second = r.take();
  CHECK(first.size() == 5);
  REQUIRE(second.size() == 9);
  CHECK(std::vector<std::byte>(second.begin(), second.begin() + 3) == pattern(3, 3));
  CHECK(std::vector<std::byte>(second.begin() + 6, second.end()) == pattern(3, 5));
}

// --- handshake -----------------------------------------------------------------------------------
namespace {
wire::handshake valid_handshake() {
  return {wire::kProtocolVersion, 128, 8192, 16u << 20};
}

void require_rejected(std::span<const std::byte> bytes) {
  auto out = wire::decode_handshake(bytes);
  REQUIRE(out.has_error());
  CHECK(out.error() == errc::handshake_rejected);
}
}  // namespace

TEST_CASE("handshake: round-trip and layout", "[wire][handshake]") {
  const auto h = valid_handshake();
  const auto bytes = wire::encode_handshake(h);
  static_assert(wire::kHandshakeSize <= 56, "must fit RC connect private data");
  CHECK(std::memcmp(bytes.data(), "RRPC", 4) == 0);
  CHECK(bytes[4] == std::byte{1});  // version, little-endian
  CHECK(bytes[5] == std::byte{0});
  CHECK(bytes[8] == std::byte{128});  // ring depth
  auto out = wire::decode_handshake(bytes);
  REQUIRE(out.has_value());
  CHECK(*out == h);

  for (const wire::handshake edge :
       {wire::handshake{1, wire::kMinRingDepth, wire::kMinSlotSize, 0},
        wire::handshake{1, wire::kMaxRingDepth, wire::kMaxSlotSize, 0xffffffffu}}) {
    auto e = wire::decode_handshake(wire::encode_handshake(edge));
    REQUIRE(e.has_value());
    CHECK(*e == edge);
  }
}

TEST_CASE("handshake: trailing padding is accepted", "[wire][handshake]") {
  const auto bytes = wire::encode_handshake(valid_handshake());
  std::vector<std::byte> padded(bytes.begin(), bytes.end());
  padded.resize(56, std::byte{0xee});  // rdma_cm may hand back the full private-data area
  auto out = wire::decode_handshake(padded);
  REQUIRE(out.has_value());
  CHECK(*out == valid_handshake());
}

TEST_CASE("handshake: malformed input / expect handshake_rejected", "[wire][handshake]") {
  const auto good = wire::encode_handshake(valid_handshake());
  SECTION("empty and short buffers") {
    require_rejected({});
    for (std::size_t n = 1; n < wire::kHandshakeSize; ++n) require_rejected(std::span(good.data(), n));
  }
  SECTION("bad magic") {
    for (std::size_t i = 0; i < 4; ++i) {
      auto bad = good;
      bad[i] ^= std::byte{0x20};
      require_rejected(bad);
    }
  }
  SECTION("unknown version") {
    for (std::uint16_t v : {std::uint16_t{0}, std::uint16_t{2}, std::uint16_t{0x0101}}) {
      auto h = valid_handshake();
      h.version = v;
      require_rejected(wire::encode_handshake(h));
    }
  }
  SECTION("nonzero flags") {
    auto bad = good;
    bad[6] = std::byte{1};
    require_rejected(bad);
    bad = good;
    bad[7] = std::byte{0x80};
    require_rejected(bad);
  }
  SECTION("ring depth out of range") {
    for (std::uint32_t depth : {0u, 1u, wire::kMinRingDepth - 1, wire::kMaxRingDepth + 1, 0xffffffffu}) {
      auto h = valid_handshake();
      h.ring_depth = depth;
      require_rejected(wire::encode_handshake(h));
    }
  }
  SECTION("slot size out of range") {
    for (std::uint32_t slot : {0u, wire::kMinSlotSize - 1, wire::kMaxSlotSize + 1, 0xffffffffu}) {
      auto h = valid_handshake();
      h.slot_size = slot;
      require_rejected(wire::encode_handshake(h));
    }
  }
}

// A peer cannot keep a message open for free: every fragment but the last is a whole slot, and the
// last is not empty.
TEST_CASE("reassembler: short or empty fragments / expect protocol_error", "[wire][reassembler]") {
  constexpr std::size_t slot = 8;
  SECTION("an empty middle fragment") {
    wire::reassembler r(1024, slot);
    REQUIRE(r.feed(fragment::first, pattern(slot)) == outcome::need_more);
    CHECK(r.feed(fragment::middle, {}) == outcome::protocol_error);
    CHECK_FALSE(r.in_progress());
  }
  SECTION("a short first fragment") {
    wire::reassembler r(1024, slot);
    CHECK(r.feed(fragment::first, pattern(slot - 1)) == outcome::protocol_error);
  }
  SECTION("a short middle fragment") {
    wire::reassembler r(1024, slot);
    REQUIRE(r.feed(fragment::first, pattern(slot)) == outcome::need_more);
    CHECK(r.feed(fragment::middle, pattern(1)) == outcome::protocol_error);
  }
  SECTION("an empty last fragment") {
    wire::reassembler r(1024, slot);
    REQUIRE(r.feed(fragment::first, pattern(slot)) == outcome::need_more);
    CHECK(r.feed(fragment::last, {}) == outcome::protocol_error);
  }
  SECTION("a last fragment longer than a slot") {
    wire::reassembler r(1024, slot);
    REQUIRE(r.feed(fragment::first, pattern(slot)) == outcome::need_more);
    CHECK(r.feed(fragment::last, pattern(slot + 1)) == outcome::protocol_error);
  }
}

// --- reject --------------------------------------------------------------------------------------

TEST_CASE(
    "reject: a listener's reason round-trips, only registered memory maps to its own error, and each "
    "is described in its own words",
    "[wire][reject]") {
  std::set<std::string_view> descriptions;
  for (const auto reason :
       {wire::reject_reason::malformed_handshake, wire::reject_reason::too_many_handshakes,
        wire::reject_reason::registered_memory_exhausted, wire::reject_reason::no_resources}) {
    CAPTURE(static_cast<int>(reason));
    const auto bytes = wire::encode_reject(reason);
    CHECK(wire::decode_reject(bytes) == reason);
    // rdma_cm pads private data: trailing bytes are ignored.
    std::vector<std::byte> padded(bytes.begin(), bytes.end());
    padded.resize(148, std::byte{0});
    CHECK(wire::decode_reject(padded) == reason);
    CHECK(wire::reject_error(reason) == (reason == wire::reject_reason::registered_memory_exhausted
                                             ? errc::registered_memory_exhausted
                                             : errc::handshake_rejected));
    descriptions.insert(wire::describe(reason));
  }
  CHECK(descriptions.size() == 4);
}

TEST_CASE("reject: what is not a reject of ours decodes to nothing", "[wire][reject]") {
  auto bytes = wire::encode_reject(wire::reject_reason::no_resources);
  CHECK_FALSE(wire::decode_reject(std::span<const std::byte>(bytes.data(), bytes.size() - 1)));  // short
  CHECK_FALSE(wire::decode_reject({}));  // the kernel's own rejects carry no private data
  auto wrong_magic = bytes;
  wrong_magic[3] = std::byte{'C'};  // a handshake's magic
  CHECK_FALSE(wire::decode_reject(wrong_magic));
  for (const int value : {0, 5, 255}) {
    auto unknown = bytes;
    unknown[4] = static_cast<std::byte>(value);
    CHECK_FALSE(wire::decode_reject(unknown));
  }
}
