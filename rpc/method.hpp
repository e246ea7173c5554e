#pragma once
// Method identity on the wire: a 32-bit FNV-1a hash of "/package.Service/Method", computed at
// compile time by generated code; servers reject colliding registrations. Layer: rpc.

#include <cstdint>
#include <string_view>

#include "rpc/message_parser.hpp"

namespace rdmarpc {

constexpr std::uint32_t method_id(std::string_view full_name) noexcept {
  std::uint32_t h = 2166136261u;
  for (char c : full_name) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 16777619u;
  }
  return h;
}

// How a method's messages flow (the .proto's `stream` keywords).
enum class rpc_kind : std::uint8_t {
  unary,             // one request, one reply
  client_streaming,  // many requests, one reply
  server_streaming,  // one request, many replies
  bidi_streaming,    // many of both, in any order
};

struct method_descriptor {
  std::string_view full_name;  // "/kv.Store/Get"
  std::uint32_t id;            // method_id(full_name)
  rpc_kind kind = rpc_kind::unary;
  // Whether the request (reply) type can lack a proto2 required field: its own, a nested message's
  // or an extension's. Only then does a unary call check IsInitialized() before it sends a message
  // and after it parses one (a missing field fails the call: INVALID_ARGUMENT for a request, INTERNAL
  // for a reply); streams always check. The generator sets false for types that cannot (every proto3
  // type that reaches no proto2 type with required fields), which saves those virtual calls; a
  // hand-written descriptor keeps true, the safe answer.
  bool request_may_lack_required = true;
  bool reply_may_lack_required = true;
  // The request's and reply's generated parsers (message_parser.hpp), for the types the generator
  // writes one for; null: protobuf's own parse.
  message_parser request_parser = nullptr;
  message_parser reply_parser = nullptr;
};

}  // namespace rdmarpc
