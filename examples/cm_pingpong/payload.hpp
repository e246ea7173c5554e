#pragma once
// The ping-pong's message contents: a sequence number followed by a pattern derived from it, so
// that a lost, reordered, duplicated or corrupted message is detected by the receiver.
// Layer: examples. Threading: pure functions.

#include <cstddef>
#include <cstdint>
#include <span>

namespace cm_pingpong {

// Writes message number `seq` into buf (buf.size() >= 8): seq little-endian, then the pattern.
void fill_payload(std::span<std::byte> buf, std::uint64_t seq);

// True when buf holds exactly what fill_payload(buf, seq) writes.
bool check_payload(std::span<const std::byte> buf, std::uint64_t seq);

}  // namespace cm_pingpong
