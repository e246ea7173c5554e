#pragma once
// credit_window: the pure credit arithmetic of one rdma connection (no I/O, no verbs), so that a
// sender can never post a send the peer has no receive posted for. Layer: transport.
// Threading: owned by one connection; used on its executor only.
//
// Model: the peer pre-posted `peer_ring_depth` receives, so we start with that many credits. Every
// send (data fragment or credit-only update) consumes one. We earn credits back when the peer
// announces slots it reposted (piggybacked in the immediate data of each of its sends). We owe the
// peer credits for every receive slot we repost; they ride on our next send, or on a credit-only
// update once `announce_threshold` are owed and nothing else is going out. `reserved` credits are
// never used for data, only for updates, so two peers that both ran out of data credits can always
// still tell each other about reposted slots: no deadlock.

#include <algorithm>
#include <cstdint>

namespace rdmarpc::transport::rdma {

class credit_window {
 public:
  // Credits one send announces at most: wire::kMaxCreditsPerImm (checked in credit_window.cpp;
  // not included here, so that this header stays free of the wire format).
  static constexpr std::uint32_t kMaxAnnounced = 0xffff;

  // Requires peer_ring_depth > reserved >= 1 and local_ring_depth >= 4 (see handshake limits);
  // throws std::invalid_argument otherwise.
  // announce_threshold = max(2, local_ring_depth / 2).
  credit_window(std::uint32_t peer_ring_depth, std::uint32_t local_ring_depth, std::uint32_t reserved = 1);

  // --- sending ------------------------------------------------------------------------------
  // A data fragment may be sent only while more than `reserved` credits remain.
  bool can_send_data() const noexcept { return credits_ > reserved_; }
  // Consumes one credit for a data fragment. Returns the credits to announce in its immediate
  // data (everything owed, capped at wire::kMaxCreditsPerImm; the rest stays owed); they count as
  // announced from now on. Precondition: can_send_data().
  std::uint32_t take_for_data() noexcept { return take_one(); }
  // True when enough credits are owed that a credit-only update should go out now and a credit
  // (reserved ones included) is available. The caller checks this whenever no data fragment can go
  // out: its send queue is empty OR stalled because !can_send_data(). (Spec fix: checking only on
  // an empty queue deadlocks two peers that both have data queued and are both down to the
  // reserved credit; tests/transport_pure/credit_window_test.cpp simulates exactly that.)
  bool wants_credit_update() const noexcept { return owed_ >= announce_threshold_ && credits_ >= 1; }
  // Consumes one credit (may be a reserved one) for a credit-only update; returns the credits to
  // announce. Precondition: wants_credit_update().
  std::uint32_t take_for_credit_update() noexcept { return take_one(); }

  // --- receiving ----------------------------------------------------------------------------
  // The peer announced `n` reposted slots. Returns false (a protocol violation: close the
  // connection) if that would give us more credits than the peer's ring has slots.
  [[nodiscard]] bool on_peer_announced(std::uint32_t n) noexcept {
    if (n > peer_ring_depth_ - credits_) return false;  // more than the peer's ring could have freed
    credits_ += n;
    return true;
  }
  // We reposted `n` receive slots: we now owe the peer `n` more credits.
  void on_local_reposted(std::uint32_t n) noexcept { owed_ += n; }

  // --- observers ----------------------------------------------------------------------------
  std::uint32_t credits() const noexcept { return credits_; }  // sends we may still post
  std::uint32_t owed() const noexcept { return owed_; }        // reposted but not yet announced
  std::uint32_t reserved() const noexcept { return reserved_; }
  std::uint32_t announce_threshold() const noexcept { return announce_threshold_; }

 private:
  // One credit spent; what is owed goes with it, up to what one immediate carries (the rest stays
  // owed for the next send).
  std::uint32_t take_one() noexcept {
    --credits_;
    const std::uint32_t announce = std::min(owed_, kMaxAnnounced);
    owed_ -= announce;
    return announce;
  }

  std::uint32_t peer_ring_depth_;
  std::uint32_t reserved_;
  std::uint32_t announce_threshold_;
  std::uint32_t credits_;
  std::uint32_t owed_ = 0;
};

}  // namespace rdmarpc::transport::rdma
