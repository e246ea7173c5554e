#include "rpc/extras.hpp"

#include <limits>

#include "rdmarpc/wire.pb.h"

namespace rdmarpc::extras {
namespace {

bool parse(google::protobuf::MessageLite& msg, std::span<const std::byte> bytes) {
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) return false;
  return msg.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
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

std::string encode_request(const metadata& md) {
  if (md.empty()) return {};
  wire::RequestExtras ex;
  put(md, *ex.mutable_metadata());
  return ex.SerializeAsString();
}

std::string encode_response(std::string_view status_message, const metadata& initial,
                            const metadata& trailing) {
  if (status_message.empty() && initial.empty() && trailing.empty()) return {};
  wire::ResponseExtras ex;
  ex.set_status_message(std::string(status_message));
  put(initial, *ex.mutable_initial_metadata());
  put(trailing, *ex.mutable_trailing_metadata());
  return ex.SerializeAsString();
}

bool decode_request(std::span<const std::byte> bytes, metadata& out) {
  if (bytes.empty()) return true;
  wire::RequestExtras ex;
  if (!parse(ex, bytes)) return false;
  take(ex.metadata(), out);
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
