#pragma once
// The rdma transport's wire format, as pure functions and a reassembly state machine (no I/O):
//  * every send is IBV_WR_SEND_WITH_IMM; the 32-bit immediate carries the piggybacked credits,
//    the fragment kind, a credit-only flag and a goodbye flag (the last message of a close()), so
//    a single-fragment message has zero header bytes and a whole slot is usable for payload (and
//    is read in place by the receiver);
//  * messages larger than a slot are split into fragments, one slot (= one credit) each;
//  * the rdma_cm connect/accept private data carries the handshake, and a listener's reject says
//    why it refused.
// Layer: transport. Threading: stateless functions; a reassembler belongs to one connection.

#include <array>
#include <boost/system/result.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "transport/error.hpp"

namespace rdmarpc::transport::rdma::wire {

// --- immediate data ----------------------------------------------------------------------------
enum class fragment : std::uint8_t { whole = 0, first = 1, middle = 2, last = 3 };

struct imm_fields {
  std::uint16_t credits = 0;  // receive slots the sender reposted since its last announcement
  fragment kind = fragment::whole;
  bool credit_only = false;  // no payload; the message carries only `credits`
  // Only with credit_only: the sender's last message before it disconnects (a graceful close), so
  // the peer can tell close() (closed_by_peer) from a process that died (connection_lost).
  bool goodbye = false;
  friend bool operator==(const imm_fields&, const imm_fields&) = default;
};

// Immediate layout (host order): bits 0-15 credits, bits 16-17 fragment kind, bit 18 credit-only,
// bit 19 goodbye, bits 20-31 reserved (must be zero, so a later version can use them and be told
// apart). Inline: every send and every receive goes through these.
namespace imm_layout {
inline constexpr std::uint32_t kCreditsMask = 0xffffu;
inline constexpr unsigned kKindShift = 16;
inline constexpr std::uint32_t kKindMask = 0x3u;
inline constexpr std::uint32_t kCreditOnlyBit = 1u << 18;
inline constexpr std::uint32_t kGoodbyeBit = 1u << 19;
inline constexpr std::uint32_t kReservedMask = ~((1u << 20) - 1u);
}  // namespace imm_layout

// Host-order value; the caller converts with htonl/ntohl at the verbs boundary (imm_data is __be32).
inline std::uint32_t encode_imm(const imm_fields& fields) noexcept {
  using namespace imm_layout;
  std::uint32_t value = fields.credits;
  value |= (static_cast<std::uint32_t>(fields.kind) & kKindMask) << kKindShift;
  if (fields.credit_only) value |= kCreditOnlyBit;
  if (fields.goodbye) value |= kGoodbyeBit;
  return value;
}

// errc::protocol_error for reserved bits set, a credit-only message that claims a fragment kind, or
// a goodbye that is not credit-only.
inline boost::system::result<imm_fields> decode_imm(std::uint32_t value) noexcept {
  using namespace imm_layout;
  if ((value & kReservedMask) != 0) return make_error_code(errc::protocol_error);
  imm_fields fields;
  fields.credits = static_cast<std::uint16_t>(value & kCreditsMask);
  fields.kind = static_cast<fragment>((value >> kKindShift) & kKindMask);
  fields.credit_only = (value & kCreditOnlyBit) != 0;
  fields.goodbye = (value & kGoodbyeBit) != 0;
  if (fields.credit_only && fields.kind != fragment::whole) return make_error_code(errc::protocol_error);
  if (fields.goodbye && !fields.credit_only) return make_error_code(errc::protocol_error);
  return fields;
}

// Largest credit count one immediate can carry; larger amounts go in several messages.
inline constexpr std::uint32_t kMaxCreditsPerImm = 0xffff;

// --- fragmentation -----------------------------------------------------------------------------
// Number of slots a message of `message_size` bytes occupies (a 0-byte message still takes one).
inline std::size_t fragment_count(std::size_t message_size, std::size_t slot_size) noexcept {
  if (slot_size == 0) return 0;             // no slot can hold anything; callers validated slot_size already
  if (message_size <= slot_size) return 1;  // the common case, without a division
  return message_size / slot_size + (message_size % slot_size != 0 ? 1 : 0);
}
// Kind of fragment `index` out of `count`.
inline fragment fragment_kind(std::size_t index, std::size_t count) noexcept {
  if (count <= 1) return fragment::whole;
  if (index == 0) return fragment::first;
  if (index + 1 >= count) return fragment::last;
  return fragment::middle;
}

// Rebuilds messages from fragments in arrival order (RC delivers in order). A sender fills every
// fragment but the last to exactly `fragment_size` (the smaller of the two sides' slot sizes), so a
// message in progress always grows by a whole slot per credit it costs and ends after at most
// max_message_size / fragment_size fragments: a peer cannot keep one open with empty fragments.
class reassembler {
 public:
  enum class outcome {
    whole,           // a single-fragment message: use the received bytes in place
    need_more,       // fragment stored; the message is not complete yet
    complete,        // the last fragment arrived: take() the assembled message
    protocol_error,  // out-of-order kind, a first or middle fragment that is not exactly
                     // fragment_size, an empty last one, or larger than max_message_size: close
                     // the connection
  };

  reassembler(std::size_t max_message_size, std::size_t fragment_size)
      : max_message_size_(max_message_size), fragment_size_(fragment_size) {}

  outcome feed(fragment kind, std::span<const std::byte> bytes) {
    // Inline: a whole message in one fragment, nearly every message.
    if (kind == fragment::whole && !in_progress_ && bytes.size() <= max_message_size_) return outcome::whole;
    return feed_any(kind, bytes);
  }
  std::vector<std::byte> take() noexcept;  // after outcome::complete
  bool in_progress() const noexcept { return in_progress_; }

 private:
  outcome feed_any(fragment kind, std::span<const std::byte> bytes);  // feed, every case

  std::size_t max_message_size_;
  std::size_t fragment_size_;
  bool in_progress_ = false;
  std::vector<std::byte> buffer_;
};

// --- handshake (rdma_cm private data) ------------------------------------------------------------
inline constexpr std::uint16_t kProtocolVersion = 1;
inline constexpr std::uint32_t kMinRingDepth = 4;
inline constexpr std::uint32_t kMaxRingDepth = 0xffff;
inline constexpr std::uint32_t kMinSlotSize = 64;
inline constexpr std::uint32_t kMaxSlotSize = 1u << 20;

struct handshake {
  std::uint16_t version = kProtocolVersion;
  std::uint32_t ring_depth = 0;        // receive slots the sender of this handshake pre-posted
  std::uint32_t slot_size = 0;         // bytes per slot: the largest fragment it accepts
  std::uint32_t max_message_size = 0;  // largest reassembled message it accepts
  friend bool operator==(const handshake&, const handshake&) = default;
};

// magic "RRPC", version, flags(0), ring_depth, slot_size, max_message_size; little-endian.
// Fits the 56 bytes rdma_connect allows for RC private data.
inline constexpr std::size_t kHandshakeSize = 20;
std::array<std::byte, kHandshakeSize> encode_handshake(const handshake& h) noexcept;
// Accepts trailing bytes (rdma_cm may pad private data). errc::handshake_rejected for a short
// buffer, wrong magic, unknown version, nonzero flags, or a field outside the limits above.
boost::system::result<handshake> decode_handshake(std::span<const std::byte> bytes) noexcept;

// --- reject (rdma_reject private data) -----------------------------------------------------------
// Why a listener refused a connection request, so the client can say so.
enum class reject_reason : std::uint8_t {
  malformed_handshake = 1,
  too_many_handshakes = 2,          // connection_options::max_pending_handshakes
  registered_memory_exhausted = 3,  // connection_options::registered_memory
  no_resources = 4,                 // the QP or its rings could not be made
};

// magic "RRPJ", the reason, three zero bytes.
inline constexpr std::size_t kRejectSize = 8;
std::array<std::byte, kRejectSize> encode_reject(reject_reason reason) noexcept;
// The reason, or nullopt when `bytes` is not a reject we send (the kernel's own rejects carry no
// private data; rdma_cm may pad ours).
std::optional<reject_reason> decode_reject(std::span<const std::byte> bytes) noexcept;
// What the client's connect fails with: registered_memory_exhausted for that reason,
// handshake_rejected for the others.
errc reject_error(reject_reason reason) noexcept;
// For the client's log: "too many handshakes in progress on the server", ...
std::string_view describe(reject_reason reason) noexcept;

}  // namespace rdmarpc::transport::rdma::wire
