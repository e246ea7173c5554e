#pragma once
// A cursor over a fuzz input: the targets read their parameters and records from it. Reading past
// the end yields zeros and empty spans, so every input is a valid (if short) script.
// Layer: tests (fuzz). Threading: one fuzz iteration.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

namespace rdmarpc::fuzz {

class input {
 public:
  input(const std::uint8_t* data, std::size_t size) noexcept
      : bytes_(reinterpret_cast<const std::byte*>(data), size) {}

  bool empty() const noexcept { return at_ == bytes_.size(); }
  std::size_t left() const noexcept { return bytes_.size() - at_; }

  // Little-endian, like every wire format here.
  template <typename T>
  T take() noexcept {
    T v = 0;
    for (std::size_t i = 0; i < sizeof(T) && !empty(); ++i)
      v |= static_cast<T>(static_cast<T>(bytes_[at_++]) << (8 * i));
    return v;
  }
  std::span<const std::byte> take_bytes(std::size_t n) noexcept {
    n = std::min(n, left());
    const auto out = bytes_.subspan(at_, n);
    at_ += n;
    return out;
  }
  std::span<const std::byte> rest() noexcept { return take_bytes(left()); }

 private:
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

// A broken invariant: libFuzzer reports the abort with the input that caused it.
[[noreturn]] inline void fail(const char* what) noexcept {
  spdlog::critical("fuzz invariant broken: {}", what);
  std::abort();
}
#define RDMARPC_FUZZ_CHECK(cond)               \
  do {                                         \
    if (!(cond)) ::rdmarpc::fuzz::fail(#cond); \
  } while (false)

// Logging is noise at millions of runs a second; invariants report through fail() (critical).
inline void quiet_logging() {
  spdlog::set_level(spdlog::level::critical);
}

}  // namespace rdmarpc::fuzz
