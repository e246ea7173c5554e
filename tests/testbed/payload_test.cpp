// Unit tests of cm_pingpong's message contents (examples/cm_pingpong/payload.hpp): the check
// must catch every kind of damage the RDMA test relies on it to catch.
#include "cm_pingpong/payload.hpp"

#include <catch2/catch.hpp>
#include <cstddef>
#include <vector>

using cm_pingpong::check_payload;
using cm_pingpong::fill_payload;

TEST_CASE("cm_pingpong payload: a filled buffer checks for its own sequence number", "[testbed][payload]") {
  for (std::size_t size : {8u, 9u, 64u, 4096u}) {
    std::vector<std::byte> buf(size);
    for (std::uint64_t seq : {0ull, 1ull, 255ull, 256ull, 0x0123456789abcdefull}) {
      fill_payload(buf, seq);
      INFO("size " << size << " seq " << seq);
      CHECK(check_payload(buf, seq));
      CHECK_FALSE(check_payload(buf, seq + 1));  // a stale or reordered message
    }
  }
}

TEST_CASE("cm_pingpong payload: any single corrupted byte is detected", "[testbed][payload]") {
  std::vector<std::byte> buf(64);
  fill_payload(buf, 42);
  for (std::size_t i = 0; i < buf.size(); ++i) {
    auto copy = buf;
    copy[i] ^= std::byte{0x01};
    INFO("byte " << i);
    CHECK_FALSE(check_payload(copy, 42));
  }
}

TEST_CASE("cm_pingpong payload: the pattern differs between messages beyond the header",
          "[testbed][payload]") {
  std::vector<std::byte> a(64), b(64);
  fill_payload(a, 7);
  fill_payload(b, 8);
  // Only the tail: a receiver that checked just the sequence number would miss a stale body.
  CHECK_FALSE(std::equal(a.begin() + 8, a.end(), b.begin() + 8));
}

TEST_CASE("cm_pingpong payload: truncated messages fail the check", "[testbed][payload]") {
  std::vector<std::byte> buf(64);
  fill_payload(buf, 3);
  CHECK_FALSE(check_payload(std::span<const std::byte>(buf).first(7), 3));
  CHECK_FALSE(check_payload({}, 3));
}
