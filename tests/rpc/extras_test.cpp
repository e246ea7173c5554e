// The extras codec: metadata both ways, and count_fields, which lets a receiver check its limits
// before parsing (well-formed counts, and every kind of malformed input).
#include "rpc/extras.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace rdmarpc;

namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace

TEST_CASE("extras: request metadata round trip and its field count") {
  const metadata md{{"a", "1"}, {"b", ""}, {"", ""}};
  const std::string wire = extras::encode_request(md);
  CHECK(extras::count_fields(bytes_of(wire)) == 3u);
  metadata back;
  REQUIRE(extras::decode_request(bytes_of(wire), back));
  CHECK(back == md);
  CHECK(extras::encode_request({}).empty());
  CHECK(extras::count_fields({}) == 0u);
}

TEST_CASE("extras: response status message and metadata round trip") {
  const std::string wire = extras::encode_response("why", {{"i", "1"}}, {{"t", "2"}, {"u", "3"}});
  CHECK(extras::count_fields(bytes_of(wire)) == 4u);  // the message and three entries
  std::string message;
  metadata initial, trailing;
  REQUIRE(extras::decode_response(bytes_of(wire), message, &initial, &trailing));
  CHECK(message == "why");
  CHECK(initial == metadata{{"i", "1"}});
  CHECK(trailing == metadata{{"t", "2"}, {"u", "3"}});
  CHECK(extras::encode_response("").empty());
}

TEST_CASE("extras: count_fields rejects malformed input without reading past it") {
  const std::string good = extras::encode_request({{"key", "value"}});
  CHECK_FALSE(extras::count_fields(bytes_of(good.substr(0, good.size() - 1))).has_value());  // short
  CHECK_FALSE(extras::count_fields(bytes_of(std::string("\x0a\x7f", 2))).has_value());  // length past end
  CHECK_FALSE(extras::count_fields(bytes_of(std::string("\x0b", 1))).has_value());      // group start
  CHECK_FALSE(extras::count_fields(bytes_of(std::string("\x08\xff", 2))).has_value());  // varint cut off
  CHECK_FALSE(extras::count_fields(bytes_of(std::string("\x00\x01", 2))).has_value());  // field number 0
  CHECK_FALSE(extras::count_fields(bytes_of(std::string(11, '\xff'))).has_value());     // varint too long
  CHECK(extras::count_fields(bytes_of(std::string("\x08\x01\x11"
                                                  "12345678"
                                                  "\x1d"
                                                  "1234",
                                                  16))) == 3u);
}
