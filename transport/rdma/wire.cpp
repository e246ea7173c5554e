#include "transport/rdma/wire.hpp"

#include <cstring>

#include "transport/error.hpp"
#include "transport/little_endian.hpp"

namespace rdmarpc::transport::rdma::wire {

reassembler::outcome reassembler::feed_any(fragment kind, std::span<const std::byte> bytes) {
  const auto fail = [this] {
    // The connection is closed on a protocol error; drop the partial message now.
    in_progress_ = false;
    buffer_ = {};
    return outcome::protocol_error;
  };
  switch (kind) {
    case fragment::whole:
      if (in_progress_ || bytes.size() > max_message_size_) return fail();
      return outcome::whole;
    case fragment::first:
      if (in_progress_ || bytes.size() != fragment_size_ || bytes.size() > max_message_size_) return fail();
      buffer_.assign(bytes.begin(), bytes.end());
      in_progress_ = true;
      return outcome::need_more;
    case fragment::middle:
    case fragment::last:
      if (!in_progress_ || bytes.size() > max_message_size_ - buffer_.size()) return fail();
      if (kind == fragment::middle ? bytes.size() != fragment_size_
                                   : bytes.empty() || bytes.size() > fragment_size_)
        return fail();
      buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
      if (kind == fragment::middle) return outcome::need_more;
      in_progress_ = false;
      return outcome::complete;
  }
  return fail();  // a kind outside the enum (decode_imm never produces one)
}

std::vector<std::byte> reassembler::take() noexcept {
  std::vector<std::byte> out = std::move(buffer_);
  buffer_ = {};
  return out;
}

// --- handshake ---------------------------------------------------------------------------------
namespace {
constexpr std::array<std::byte, 4> kMagic{std::byte{'R'}, std::byte{'R'}, std::byte{'P'}, std::byte{'C'}};

// Offsets of the fields in the 20-byte handshake.
constexpr std::size_t kVersionAt = 4, kFlagsAt = 6, kDepthAt = 8, kSlotAt = 12, kMaxMessageAt = 16;
}  // namespace

std::array<std::byte, kHandshakeSize> encode_handshake(const handshake& h) noexcept {
  std::array<std::byte, kHandshakeSize> out{};
  std::memcpy(out.data(), kMagic.data(), kMagic.size());
  store_le(out.data() + kVersionAt, h.version);
  store_le(out.data() + kFlagsAt, std::uint16_t{0});
  store_le(out.data() + kDepthAt, h.ring_depth);
  store_le(out.data() + kSlotAt, h.slot_size);
  store_le(out.data() + kMaxMessageAt, h.max_message_size);
  return out;
}

boost::system::result<handshake> decode_handshake(std::span<const std::byte> bytes) noexcept {
  const auto rejected = make_error_code(errc::handshake_rejected);
  if (bytes.size() < kHandshakeSize) return rejected;
  if (std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) return rejected;
  handshake h;
  h.version = load_le<std::uint16_t>(bytes.data() + kVersionAt);
  if (h.version != kProtocolVersion) return rejected;
  if (load_le<std::uint16_t>(bytes.data() + kFlagsAt) != 0) return rejected;
  h.ring_depth = load_le<std::uint32_t>(bytes.data() + kDepthAt);
  h.slot_size = load_le<std::uint32_t>(bytes.data() + kSlotAt);
  h.max_message_size = load_le<std::uint32_t>(bytes.data() + kMaxMessageAt);
  if (h.ring_depth < kMinRingDepth || h.ring_depth > kMaxRingDepth) return rejected;
  if (h.slot_size < kMinSlotSize || h.slot_size > kMaxSlotSize) return rejected;
  return h;
}

// --- reject ------------------------------------------------------------------------------------
namespace {
constexpr std::array<std::byte, 4> kRejectMagic{std::byte{'R'}, std::byte{'R'}, std::byte{'P'},
                                                std::byte{'J'}};
constexpr std::size_t kReasonAt = 4;
}  // namespace

std::array<std::byte, kRejectSize> encode_reject(reject_reason reason) noexcept {
  std::array<std::byte, kRejectSize> out{};
  std::memcpy(out.data(), kRejectMagic.data(), kRejectMagic.size());
  out[kReasonAt] = static_cast<std::byte>(reason);
  return out;
}

std::optional<reject_reason> decode_reject(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() < kRejectSize) return std::nullopt;
  if (std::memcmp(bytes.data(), kRejectMagic.data(), kRejectMagic.size()) != 0) return std::nullopt;
  const auto value = static_cast<std::uint8_t>(bytes[kReasonAt]);
  if (value < 1 || value > static_cast<std::uint8_t>(reject_reason::no_resources)) return std::nullopt;
  return static_cast<reject_reason>(value);
}

std::string_view describe(reject_reason reason) noexcept {
  switch (reason) {
    case reject_reason::malformed_handshake:
      return "the server found our handshake malformed or incompatible";
    case reject_reason::too_many_handshakes: return "too many handshakes in progress on the server";
    case reject_reason::registered_memory_exhausted: return "the server's registered-memory budget is full";
    case reject_reason::no_resources: return "the server could not make the queue pair or its rings";
  }
  return "unknown reason";
}

errc reject_error(reject_reason reason) noexcept {
  return reason == reject_reason::registered_memory_exhausted ? errc::registered_memory_exhausted
                                                              : errc::handshake_rejected;
}

}  // namespace rdmarpc::transport::rdma::wire
