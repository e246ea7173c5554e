#pragma once
// Frames written and looked up by hand, for tests that play a misbehaving peer over a raw
// connection (stream_violation_test, stream_lifecycle_test).

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rpc/frame.hpp"

namespace rdmarpc::test {

// The whole frame: `h` with its lengths set from `ex` and `payload`, then both.
inline std::string encode_frame(frame::header h, std::string_view ex = {}, std::string_view payload = {}) {
  h.extras_length = static_cast<std::uint32_t>(ex.size());
  h.payload_length = static_cast<std::uint32_t>(payload.size());
  std::string bytes(frame::header_size(h), '\0');
  frame::encode_header(h, std::span<std::byte>(reinterpret_cast<std::byte*>(bytes.data()), bytes.size()));
  bytes.append(ex);
  bytes.append(payload);
  return bytes;
}

// The header of the first well-formed frame of `kind` (for stream `id`, when given) in `messages`.
inline std::optional<frame::header> find_frame(const std::vector<std::vector<std::byte>>& messages,
                                               frame::kind kind,
                                               std::optional<std::uint32_t> id = std::nullopt) {
  for (const auto& m : messages) {
    frame::decode_error err{};
    const auto v = frame::decode(std::span<const std::byte>(m.data(), m.size()), err);
    if (err == frame::decode_error::none && v.header.kind == kind && (!id || v.header.call_id == *id)) {
      return v.header;
    }
  }
  return std::nullopt;
}

}  // namespace rdmarpc::test
