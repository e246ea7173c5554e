// libFuzzer target: the rdma_cm private data of the connection handshake (transport/rdma/wire.hpp,
// decode_handshake), as the connector and the listener meet a peer's, and of a listener's reject
// (decode_reject), as the connector meets it. An accepted handshake has every field inside the
// documented limits and re-encodes to the same 20 bytes, a reject to the same 8 (anything after
// them is padding rdma_cm may add).
#include <cstring>

#include "fuzz_input.hpp"
#include "transport/rdma/wire.hpp"

namespace wire = rdmarpc::transport::rdma::wire;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmarpc::fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  if (const auto reason = wire::decode_reject(bytes)) {
    RDMARPC_FUZZ_CHECK(size >= wire::kRejectSize);
    const auto again = wire::encode_reject(*reason);
    RDMARPC_FUZZ_CHECK(std::memcmp(again.data(), data, wire::kRejectSize - 3) == 0);  // magic + reason
    RDMARPC_FUZZ_CHECK(wire::decode_reject(again) == reason);
  }
  const auto h = wire::decode_handshake(bytes);
  if (!h) return 0;
  RDMARPC_FUZZ_CHECK(size >= wire::kHandshakeSize);
  RDMARPC_FUZZ_CHECK(h->version == wire::kProtocolVersion);
  RDMARPC_FUZZ_CHECK(h->ring_depth >= wire::kMinRingDepth && h->ring_depth <= wire::kMaxRingDepth);
  RDMARPC_FUZZ_CHECK(h->slot_size >= wire::kMinSlotSize && h->slot_size <= wire::kMaxSlotSize);
  const auto again = wire::encode_handshake(*h);
  RDMARPC_FUZZ_CHECK(std::memcmp(again.data(), data, wire::kHandshakeSize) == 0);
  const auto twice = wire::decode_handshake(again);
  RDMARPC_FUZZ_CHECK(twice.has_value() && *twice == *h);
  return 0;
}
