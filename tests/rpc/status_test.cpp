// Status codes: names, category, and the mapping from transport and Asio errors to what a caller sees.
#include "rpc/status.hpp"

#include <boost/asio/error.hpp>
#include <catch2/catch.hpp>

#include "rpc/extras.hpp"
#include "transport/error.hpp"

using rdmarpc::status_code;
using rdmarpc::to_status_code;
using rdmarpc::transport::errc;

TEST_CASE("status: names follow the gRPC spelling and the category round-trips", "[status]") {
  CHECK(rdmarpc::to_string(status_code::ok) == "OK");
  CHECK(rdmarpc::to_string(status_code::deadline_exceeded) == "DEADLINE_EXCEEDED");
  CHECK(rdmarpc::to_string(status_code::unauthenticated) == "UNAUTHENTICATED");
  for (int c = 0; c <= 16; ++c) {
    const auto code = static_cast<status_code>(c);
    const boost::system::error_code ec = code;  // implicit through is_error_code_enum
    CHECK(ec.category() == rdmarpc::status_category());
    CHECK(to_status_code(ec) == code);
    CHECK(ec.message() == rdmarpc::to_string(code));
  }
  CHECK(std::string(rdmarpc::status_category().name()) == "rdmarpc.status");
}

TEST_CASE("status: success maps to OK and out-of-range values to UNKNOWN", "[status]") {
  CHECK(to_status_code(boost::system::error_code{}) == status_code::ok);
  CHECK(to_status_code(boost::system::error_code(99, rdmarpc::status_category())) == status_code::unknown);
  CHECK(rdmarpc::to_string(static_cast<status_code>(200)) == "UNKNOWN");
}

TEST_CASE("status: transport errors map to what the caller should do", "[status]") {
  // Connection gone or never made: retry elsewhere/later.
  for (auto e : {errc::closed_locally, errc::closed_by_peer, errc::connection_lost, errc::handshake_rejected,
                 errc::unreachable, errc::connect_timeout, errc::rnr_retry_exceeded, errc::device_error,
                 errc::not_connected, errc::address_changed, errc::queue_pair_error, errc::port_down,
                 errc::registered_memory_exhausted}) {
    CAPTURE(static_cast<int>(e));
    CHECK(to_status_code(make_error_code(e)) == status_code::unavailable);
  }
  // Too big or too many: back off.
  CHECK(to_status_code(make_error_code(errc::message_too_large)) == status_code::resource_exhausted);
  CHECK(to_status_code(boost::asio::error::would_block) == status_code::resource_exhausted);
  // The caller's own mistake.
  CHECK(to_status_code(make_error_code(errc::bad_uri)) == status_code::invalid_argument);
  CHECK(to_status_code(make_error_code(errc::unsupported_scheme)) == status_code::invalid_argument);
  // A peer that breaks the protocol is a bug, not a transient condition.
  CHECK(to_status_code(make_error_code(errc::protocol_error)) == status_code::internal);
}

TEST_CASE("status: Asio and system errors", "[status]") {
  CHECK(to_status_code(boost::asio::error::operation_aborted) == status_code::cancelled);
  CHECK(to_status_code(boost::asio::error::connection_reset) == status_code::unavailable);
  CHECK(to_status_code(boost::asio::error::connection_refused) == status_code::unavailable);
  CHECK(to_status_code(boost::asio::error::timed_out) == status_code::unavailable);
  CHECK(to_status_code(boost::asio::error::eof) == status_code::unavailable);
}

TEST_CASE("status: status_error carries code and message", "[status]") {
  const rdmarpc::status_error e(status_code::not_found, "no such key");
  CHECK(e.code() == status_code::not_found);
  CHECK(e.message() == "no such key");
  CHECK(std::string(e.what()).find("no such key") != std::string::npos);
}

TEST_CASE("extras: metadata and status message round trip, garbage is rejected", "[extras]") {
  const rdmarpc::metadata md{{"trace-id", "abc"}, {"bin", std::string("\xff\x00\x01", 3)}};
  const auto bytes = rdmarpc::extras::encode_request(md);
  rdmarpc::metadata out;
  REQUIRE(rdmarpc::extras::decode_request(std::as_bytes(std::span(bytes.data(), bytes.size())), out));
  CHECK(out == md);
  CHECK(rdmarpc::extras::encode_request({}).empty());

  const std::string msg = "bad \xc3 utf8";  // invalid UTF-8 must survive (bytes field)
  const auto rbytes = rdmarpc::extras::encode_response(msg);
  std::string got;
  REQUIRE(rdmarpc::extras::decode_response(std::as_bytes(std::span(rbytes.data(), rbytes.size())), got));
  CHECK(got == msg);

  const unsigned char garbage[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F};
  std::string ignored;
  CHECK_FALSE(rdmarpc::extras::decode_response(std::as_bytes(std::span(garbage)), ignored));
  rdmarpc::metadata md2;
  CHECK_FALSE(rdmarpc::extras::decode_request(std::as_bytes(std::span(garbage)), md2));
}
