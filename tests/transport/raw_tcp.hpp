#pragma once
// For tests that play a raw tcp peer: the tcp transport's 4-byte little-endian length prefix, and
// this process's resident memory (what a hostile peer's bytes cost).

#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <fstream>

namespace rdmarpc::test {

inline std::array<std::byte, 4> le_length(std::uint32_t n) {
  return {std::byte(n & 0xff), std::byte((n >> 8) & 0xff), std::byte((n >> 16) & 0xff), std::byte(n >> 24)};
}

// Resident memory of this process (Linux: /proc/self/statm, second field, in pages).
inline std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t total_pages = 0, resident_pages = 0;
  statm >> total_pages >> resident_pages;
  return resident_pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace rdmarpc::test
