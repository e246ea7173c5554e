#pragma once
// parse_message: one received protobuf into its message, the single place the rpc layer parses one
// (unary requests and replies, stream messages, the wire metadata of extras.cpp). Layer: rpc.
// Threading: none of its own.

#include <google/protobuf/message_lite.h>

#include <cstddef>
#include <span>

#include "rpc/message_parser.hpp"

namespace rdmarpc::detail {

// Clears `into` and parses `bytes` into it: ParseFromArray's check without libprotobuf's own error
// log (a bad message is its sender's problem, reported as a status). `check_required` asks for
// IsInitialized() after the partial parse; a type that cannot lack a proto2 required field, nor
// reach one that can, passes false and skips it (method_descriptor::request_may_lack_required).
// `parser`: the type's generated parser (method_descriptor::request_parser / reply_parser), which
// parses as protobuf would; null for protobuf's own parse.
// A template so a concrete (final) generated type's IsInitialized() is a direct call.
template <typename Message>
inline bool parse_message(Message& into, std::span<const std::byte> bytes, message_parser parser,
                          bool check_required) {
  const bool parsed = parser != nullptr ? parser(into, bytes) : protobuf_wire::protobuf_parse(into, bytes);
  return parsed && (!check_required || into.IsInitialized());
}

template <typename Message>
inline bool parse_message(Message& into, std::span<const std::byte> bytes, bool check_required) {
  return parse_message(into, bytes, nullptr, check_required);
}

}  // namespace rdmarpc::detail
