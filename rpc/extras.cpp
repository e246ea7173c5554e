#include "rpc/extras.hpp"

#include <cstdint>

#include "rdmarpc/wire.pb.h"
#include "rpc/parse_message.hpp"

namespace rdmarpc::extras {
namespace {

bool parse(google::protobuf::MessageLite& msg, std::span<const std::byte> bytes) {
  return rdmarpc::detail::parse_message(msg, bytes, /*check_required=*/true);
}

// Reads a base-128 varint at p (advancing it); false when it runs past `end` or over 10 bytes.
bool read_varint(const std::byte*& p, const std::byte* end, std::uint64_t& out) noexcept {
  out = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const auto b = static_cast<std::uint8_t>(*p++);
    out |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

template <typename Entries>
void put(const metadata& md, Entries& out) {
  out.Reserve(static_cast<int>(md.size()));
  for (const auto& [key, value] : md) {
    auto* entry = out.Add();
    entry->set_key(key);
    entry->set_value(value);
  }
}

template <typename Entries>
void take(const Entries& in, metadata& out) {
  out.reserve(out.size() + static_cast<std::size_t>(in.size()));
  for (const auto& entry : in) out.emplace_back(entry.key(), entry.value());
}

}  // namespace

std::optional<std::size_t> count_fields(std::span<const std::byte> bytes) noexcept {
  const std::byte* p = bytes.data();
  const std::byte* const end = p + bytes.size();
  std::size_t fields = 0;
  while (p < end) {
    std::uint64_t tag = 0, value = 0;
    if (!read_varint(p, end, tag) || (tag >> 3) == 0) return std::nullopt;
    switch (tag & 7) {
      case 0:  // varint
        if (!read_varint(p, end, value)) return std::nullopt;
        break;
      case 1:  // fixed64
        if (end - p < 8) return std::nullopt;
        p += 8;
        break;
      case 2:  // length-delimited
        if (!read_varint(p, end, value) || value > static_cast<std::uint64_t>(end - p)) return std::nullopt;
        p += value;
        break;
      case 5:  // fixed32
        if (end - p < 4) return std::nullopt;
        p += 4;
        break;
      default: return std::nullopt;  // groups (3, 4) and invalid types: not in our extras
    }
    ++fields;
  }
  return fields;
}

std::string encode_request(const metadata& md, const stream_window_size* window) {
  if (md.empty() && window == nullptr) return {};
  wire::RequestExtras ex;
  put(md, *ex.mutable_metadata());
  if (window != nullptr) {
    ex.mutable_window()->set_bytes(window->bytes);
    ex.mutable_window()->set_messages(window->messages);
  }
  return ex.SerializeAsString();
}

std::string detail::encode_response_fields(std::string_view status_message, const metadata& initial,
                                           const metadata& trailing) {
  wire::ResponseExtras ex;
  ex.set_status_message(std::string(status_message));
  put(initial, *ex.mutable_initial_metadata());
  put(trailing, *ex.mutable_trailing_metadata());
  return ex.SerializeAsString();
}

bool decode_request(std::span<const std::byte> bytes, metadata& out, stream_window_size* window) {
  if (bytes.empty()) return true;
  wire::RequestExtras ex;
  if (!parse(ex, bytes)) return false;
  take(ex.metadata(), out);
  if (window != nullptr && ex.has_window()) *window = {ex.window().bytes(), ex.window().messages()};
  return true;
}

bool decode_response(std::span<const std::byte> bytes, std::string& status_message, metadata* initial,
                     metadata* trailing) {
  if (bytes.empty()) return true;
  wire::ResponseExtras ex;
  if (!parse(ex, bytes)) return false;
  status_message = ex.status_message();
  if (initial != nullptr) take(ex.initial_metadata(), *initial);
  if (trailing != nullptr) take(ex.trailing_metadata(), *trailing);
  return true;
}

}  // namespace rdmarpc::extras
