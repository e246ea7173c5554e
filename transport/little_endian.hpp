#pragma once
// Little-endian integers at any address, for the wire formats (the rdma handshake, tcp's length
// prefix, rpc frames): one unaligned load or store on a little-endian host (the compiler turns the
// memcpy into a mov), byte by byte elsewhere. Layer: transport (rpc uses it too).

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstring>

namespace rdmarpc::transport {

template <std::unsigned_integral T>
void store_le(std::byte* p, T v) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof(T));
  } else {
    for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
  }
}

template <std::unsigned_integral T>
T load_le(const std::byte* p) noexcept {
  T v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, sizeof(T));
  } else {
    for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  }
  return v;
}

}  // namespace rdmarpc::transport
