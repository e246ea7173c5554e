#include "transport/rdma/credit_window.hpp"

#include <algorithm>
#include <stdexcept>

#include "transport/rdma/wire.hpp"

namespace rdmarpc::transport::rdma {

static_assert(credit_window::kMaxAnnounced == wire::kMaxCreditsPerImm);

credit_window::credit_window(std::uint32_t peer_ring_depth, std::uint32_t local_ring_depth,
                             std::uint32_t reserved)
    : peer_ring_depth_(peer_ring_depth),
      reserved_(reserved),
      announce_threshold_(std::max<std::uint32_t>(2, local_ring_depth / 2)),
      credits_(peer_ring_depth) {
  // Setup-time check (the handshake already validated both depths): a window that breaks these
  // could deadlock or never announce, so refuse it loudly instead of misbehaving later.
  if (reserved < 1 || peer_ring_depth <= reserved || local_ring_depth < wire::kMinRingDepth) {
    throw std::invalid_argument(
        "credit_window: requires peer_ring_depth > reserved >= 1 and local_ring_depth >= 4");
  }
}

}  // namespace rdmarpc::transport::rdma
