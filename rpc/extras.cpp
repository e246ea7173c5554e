#include "rpc/extras.hpp"

#include <limits>

#include "rdmarpc/wire.pb.h"

namespace rdmarpc::extras {
namespace {

bool parse(google::protobuf::MessageLite& msg, std::span<const std::byte> bytes) {
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) return false;
  return msg.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace

std::string encode_request(const metadata& md) {
  if (md.empty()) return {};
  wire::RequestExtras ex;
  for (const auto& [key, value] : md) {
    auto* entry = ex.add_metadata();
    entry->set_key(key);
    entry->set_value(value);
  }
  return ex.SerializeAsString();
}

std::string encode_response(std::string_view status_message) {
  if (status_message.empty()) return {};
  wire::ResponseExtras ex;
  ex.set_status_message(std::string(status_message));
  return ex.SerializeAsString();
}

bool decode_request(std::span<const std::byte> bytes, metadata& out) {
  if (bytes.empty()) return true;
  wire::RequestExtras ex;
  if (!parse(ex, bytes)) return false;
  out.reserve(out.size() + static_cast<std::size_t>(ex.metadata_size()));
  for (const auto& entry : ex.metadata()) out.emplace_back(entry.key(), entry.value());
  return true;
}

bool decode_response(std::span<const std::byte> bytes, std::string& status_message) {
  if (bytes.empty()) return true;
  wire::ResponseExtras ex;
  if (!parse(ex, bytes)) return false;
  status_message = ex.status_message();
  return true;
}

}  // namespace rdmarpc::extras
