#pragma once
// Canonical RPC status codes (the gRPC set) as an error-code enum with its own category, plus the
// mapping from transport errors. Layer: rpc. Threading: stateless.
// Every rpc completion reports a boost::system::error_code in status_category() (or success).

#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace rdmarpc {

enum class status_code : std::uint8_t {
  ok = 0,
  cancelled = 1,  // the caller cancelled the call
  unknown = 2,
  invalid_argument = 3,   // the request could not be parsed, or the handler rejected it
  deadline_exceeded = 4,  // the deadline passed before a reply arrived
  not_found = 5,
  already_exists = 6,
  permission_denied = 7,
  resource_exhausted = 8,  // message too large, too many calls in flight, queue full
  failed_precondition = 9,
  aborted = 10,
  out_of_range = 11,
  unimplemented = 12,  // no such method on the server
  internal = 13,       // the handler threw, or a protocol invariant broke
  unavailable = 14,    // not connected, connection lost, server shutting down: retry
  data_loss = 15,
  unauthenticated = 16,
};

// `c` when it is one of the canonical codes 0..16, else UNKNOWN: what a handler's cast of its own
// number becomes, on the server (server_context::set_status) and on the wire (frame::status_byte).
constexpr status_code canonical(status_code c) noexcept {
  return static_cast<std::uint8_t>(c) <= static_cast<std::uint8_t>(status_code::unauthenticated)
             ? c
             : status_code::unknown;
}

const boost::system::error_category& status_category() noexcept;

inline boost::system::error_code make_error_code(status_code c) noexcept {
  return {static_cast<int>(c), status_category()};
}

std::string_view to_string(status_code c) noexcept;  // "NOT_FOUND"

// Any error_code to the status a caller should see (transport errc -> UNAVAILABLE etc.,
// operation_aborted -> CANCELLED, status_category codes unchanged, success -> ok).
status_code to_status_code(const boost::system::error_code& ec) noexcept;

// Throw from a server handler to answer with a specific status and message.
class status_error : public boost::system::system_error {
 public:
  status_error(status_code code, const std::string& message)
      : boost::system::system_error(make_error_code(code), message), message_(message) {}
  status_code code() const noexcept { return static_cast<status_code>(system_error::code().value()); }
  const std::string& message() const noexcept { return message_; }

 private:
  std::string message_;
};

}  // namespace rdmarpc

template <>
struct boost::system::is_error_code_enum<rdmarpc::status_code> : std::true_type {};
