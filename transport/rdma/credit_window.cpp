#include "transport/rdma/credit_window.hpp"

#include <algorithm>
#include <stdexcept>

#include "transport/rdma/wire.hpp"

namespace rdmarpc::transport::rdma {

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

bool credit_window::can_send_data() const noexcept {
  return credits_ > reserved_;
}

namespace {
// One immediate carries at most kMaxCreditsPerImm; anything beyond stays owed for the next send.
std::uint32_t announceable(std::uint32_t owed) noexcept {
  return std::min(owed, wire::kMaxCreditsPerImm);
}
}  // namespace

std::uint32_t credit_window::take_for_data() noexcept {
  --credits_;
  const std::uint32_t announce = announceable(owed_);
  owed_ -= announce;
  return announce;
}

bool credit_window::wants_credit_update() const noexcept {
  return owed_ >= announce_threshold_ && credits_ >= 1;
}

std::uint32_t credit_window::take_for_credit_update() noexcept {
  --credits_;
  const std::uint32_t announce = announceable(owed_);
  owed_ -= announce;
  return announce;
}

bool credit_window::on_peer_announced(std::uint32_t n) noexcept {
  if (n > peer_ring_depth_ - credits_) return false;  // more than the peer's ring could have freed
  credits_ += n;
  return true;
}

void credit_window::on_local_reposted(std::uint32_t n) noexcept {
  owed_ += n;
}

}  // namespace rdmarpc::transport::rdma
