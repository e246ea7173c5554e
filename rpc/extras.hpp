#pragma once
// Encoding of the optional frame extras (proto/rdmarpc/wire.proto): request metadata, and a
// response's status message with the server's initial and trailing metadata. Layer: rpc. Threading: stateless
// functions.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "rpc/client_context.hpp"
#include "rpc/stream_window.hpp"

namespace rdmarpc::extras {

// The number of top-level fields in serialized extras (each metadata entry is one), found without
// parsing or allocating; nullopt when the bytes are not a well-formed protobuf message. Lets a
// receiver enforce its limits before decoding.
std::optional<std::size_t> count_fields(std::span<const std::byte> bytes) noexcept;

// Empty string when there is nothing to send (the frame then has extras_length 0).
// `window`: a stream_open's receive window (null for a unary request).
std::string encode_request(const metadata& md, const stream_window_size* window = nullptr);
namespace detail {
std::string encode_response_fields(std::string_view status_message, const metadata& initial,
                                   const metadata& trailing);
}  // namespace detail
// Inline: most responses carry nothing, and then no call is made.
inline std::string encode_response(std::string_view status_message, const metadata& initial = {},
                                   const metadata& trailing = {}) {
  if (status_message.empty() && initial.empty() && trailing.empty()) return {};
  return detail::encode_response_fields(status_message, initial, trailing);
}

// False when the bytes do not parse (a malformed frame). Empty input is valid and yields nothing.
// `window` (may be null) is set when the extras carry one, else left as it is.
bool decode_request(std::span<const std::byte> bytes, metadata& out, stream_window_size* window = nullptr);
// `initial` and `trailing` may be null (the caller does not want them; they are still checked).
bool decode_response(std::span<const std::byte> bytes, std::string& status_message,
                     metadata* initial = nullptr, metadata* trailing = nullptr);

}  // namespace rdmarpc::extras
