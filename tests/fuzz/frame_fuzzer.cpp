// libFuzzer target: rpc/frame.hpp's decode on arbitrary messages. Beyond "no crash, no UB": a
// decoded frame's views lie inside the message and cover it exactly, its fields obey the per-kind
// rules of docs/wire-format.md, and re-encoding its header gives back the same bytes (compact or full).
#include <array>
#include <cstring>

#include "fuzz_input.hpp"
#include "rpc/frame.hpp"

using namespace rdmarpc;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> message(reinterpret_cast<const std::byte*>(data), size);
  frame::decode_error err{};
  const frame::view v = frame::decode(message, err);
  RDMARPC_FUZZ_CHECK(frame::to_string(err) != nullptr);
  if (err != frame::decode_error::none) return 0;

  const frame::header& h = v.header;
  const std::size_t head = frame::header_size(h);
  const bool compact = h.kind == frame::kind::request || h.kind == frame::kind::response ||
                       h.kind == frame::kind::stream_message;
  RDMARPC_FUZZ_CHECK(compact ? head < frame::kHeaderSize : head == frame::kHeaderSize);
  RDMARPC_FUZZ_CHECK(size == head + v.extras.size() + v.payload.size());
  RDMARPC_FUZZ_CHECK(v.extras.size() == h.extras_length && v.payload.size() == h.payload_length);
  if (!v.extras.empty()) RDMARPC_FUZZ_CHECK(v.extras.data() == message.data() + head);
  if (!v.payload.empty()) RDMARPC_FUZZ_CHECK(v.payload.data() + v.payload.size() == message.data() + size);
  const auto k = static_cast<std::uint8_t>(h.kind);
  RDMARPC_FUZZ_CHECK(k >= 1 && k <= frame::kLastKind);
  RDMARPC_FUZZ_CHECK((h.flags & ~frame::kKnownFlags) == 0);
  RDMARPC_FUZZ_CHECK(static_cast<std::uint8_t>(h.status) <= 16);
  const bool timed = h.kind == frame::kind::request || h.kind == frame::kind::stream_open;
  const bool window = h.kind == frame::kind::window_update || h.kind == frame::kind::stream_headers;
  // ping/pong: about the connection (call_id 0): the opaque value in timeout_us and, as payload,
  // nothing or the sender's 8-byte heartbeat domain.
  const bool heartbeat = h.kind == frame::kind::ping || h.kind == frame::kind::pong;
  if (timed) {
    RDMARPC_FUZZ_CHECK(h.has_timeout() ? h.timeout_us <= frame::kMaxTimeoutUs : h.timeout_us == 0);
  } else if (heartbeat) {
    RDMARPC_FUZZ_CHECK(h.flags == 0 && h.call_id == 0 && h.method_id == 0 && h.extras_length == 0 &&
                       (h.payload_length == 0 || h.payload_length == frame::kHeartbeatDomainSize));
  } else if (!window) {
    RDMARPC_FUZZ_CHECK(h.flags == 0 && h.timeout_us == 0);
  }
  if (h.kind == frame::kind::cancel || h.kind == frame::kind::half_close || window) {
    RDMARPC_FUZZ_CHECK(h.extras_length == 0 && h.payload_length == 0);
  }
  if (h.kind == frame::kind::going_away) {  // about the connection, and nothing else
    RDMARPC_FUZZ_CHECK(h.call_id == 0 && h.method_id == 0 && h.extras_length == 0 && h.payload_length == 0);
  }

  if (h.kind == frame::kind::response || h.kind == frame::kind::stream_message) {
    RDMARPC_FUZZ_CHECK(h.flags == 0 && h.method_id == 0 && h.timeout_us == 0);
  }
  if (h.kind == frame::kind::stream_message) RDMARPC_FUZZ_CHECK(h.status == status_code::ok);
  std::array<std::byte, frame::kHeaderSize> again{};
  RDMARPC_FUZZ_CHECK(frame::encode_header(h, again) == head);
  RDMARPC_FUZZ_CHECK(std::memcmp(again.data(), data, head) == 0);
  return 0;
}
