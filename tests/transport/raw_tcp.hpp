#pragma once
// For tests that play a raw tcp peer: the tcp transport's 4-byte little-endian length prefix, and
// this process's resident memory and its peak, its heap in use and its open fds (what a hostile
// peer costs).

#include <malloc.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// The sanitizer runtime's count of heap bytes in use (GCC 12 ships no header declaring it).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

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

// Resident memory a sanitizer adds to each byte the program touches: TSan's shadow is four times
// the memory, ASan's an eighth plus redzones and its quarantine. Bounds on resident memory scale by it.
#if defined(__SANITIZE_THREAD__)
inline constexpr std::size_t kResidentFactor = 5;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr std::size_t kResidentFactor = 2;
#else
inline constexpr std::size_t kResidentFactor = 1;
#endif

// Starts a new peak for peak_resident_bytes() (Linux: writing 5 to /proc/self/clear_refs), after
// giving free heap back to the system so that it cannot absorb what is measured next. Where the
// reset is not allowed the peak is the process's whole life; ctest runs each case in a process of
// its own, so that adds only this case's set-up (a bound can fail falsely, never pass falsely).
inline void reset_peak_resident() {
  ::malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
}

// The largest resident_bytes() since reset_peak_resident() (/proc/self/status VmHWM).
inline std::size_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  std::size_t kib = 0;
  while (status >> key) {
    if (key == "VmHWM:") {
      status >> kib;
      break;
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return kib * 1024;
}

// Heap bytes allocated and not freed now, whatever the allocator keeps cached: malloc's arenas and
// its own mappings for large blocks (the sanitizer's count under ASan or TSan).
inline std::size_t heap_bytes_in_use() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

// Open file descriptors of this process (/proc/self/fd).
inline std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

}  // namespace rdmarpc::test
