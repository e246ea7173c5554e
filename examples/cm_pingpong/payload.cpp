#include "cm_pingpong/payload.hpp"

namespace cm_pingpong {
namespace {

constexpr std::size_t kSeqBytes = 8;

// Byte i of message seq; varies with both, so a stale or shifted buffer does not match.
std::byte pattern_byte(std::uint64_t seq, std::size_t i) {
  return static_cast<std::byte>((seq * 131 + i * 7 + 1) & 0xff);
}

std::byte seq_byte(std::uint64_t seq, std::size_t i) {
  return static_cast<std::byte>((seq >> (8 * i)) & 0xff);
}

}  // namespace

void fill_payload(std::span<std::byte> buf, std::uint64_t seq) {
  for (std::size_t i = 0; i < buf.size(); ++i) {
    buf[i] = i < kSeqBytes ? seq_byte(seq, i) : pattern_byte(seq, i);
  }
}

bool check_payload(std::span<const std::byte> buf, std::uint64_t seq) {
  if (buf.size() < kSeqBytes) return false;
  for (std::size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != (i < kSeqBytes ? seq_byte(seq, i) : pattern_byte(seq, i))) return false;
  }
  return true;
}

}  // namespace cm_pingpong
