#pragma once
// qp_resources: every verbs object one rdma connection owns (event channel, cm_id, PD, receive
// ring and send pool MRs, completion channel, CQ, QP), sized from connection_options.
// Layer: transport (rdma). Threading: owned by one connector/listener/connection at a time.
// Members are declared in reverse teardown order, so they are destroyed as rdma-core's
// rdma_server.c tears down: QP, CQ, completion channel, MRs, PD, cm_id, event channel.

#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "transport/connection.hpp"
#include "verbs/handles.hpp"

namespace rdmarpc::transport::rdma {

class qp_resources {
 public:
  // `id` must already be bound to a device (route resolved, or from a CONNECT_REQUEST).
  // `channel` is where the connection's rdma_cm events will arrive once the id is on it (a server
  // id stays on the listener's channel until migrate_to_own_channel()). Throws system_error
  // (errc::registered_memory_exhausted when options.registered_memory cannot lease the rings,
  // before anything is allocated) or invalid_argument (options outside the limits).
  qp_resources(verbs::event_channel channel, verbs::cm_id id, const connection_options& options);
  // Throws std::invalid_argument, naming the option, its value and its range, when `options`
  // cannot make these rings: recv_ring_depth outside [4, 65535], slot_size outside [64 B, 1 MiB]
  // (the handshake's limits), send_buffers outside [2, 65535], signal_every outside
  // [1, send_buffers], or rings larger than options.registered_memory's whole limit.
  static void check_options(const connection_options& options);
  // The registered memory the rings of a connection with `options` take (leased from
  // options.registered_memory).
  static std::size_t registered_bytes(const connection_options& options) noexcept {
    return receive_ring_bytes(options) + send_ring_bytes(options);
  }
  // Its two parts: the receive ring (slots, then their heads) and the send ring.
  static std::size_t receive_ring_bytes(const connection_options& options) noexcept {
    return std::size_t{options.recv_ring_depth} * (options.slot_size + head_bytes(options.slot_size));
  }
  static std::size_t send_ring_bytes(const connection_options& options) noexcept {
    return std::size_t{options.send_buffers} * options.slot_size;
  }

  // Every receive lands its first kRecvHeadBytes in a small head of its own, packed with the other
  // slots' heads in one compact region; only what goes beyond continues in the slot (a second
  // SGE). Most RPC messages fit in the head, so consecutive messages land next to each other
  // instead of a whole slot apart: a few pages for the ring's small traffic instead of one page
  // per message, which costs TLB and cache misses (under the VM's TCG, ~1 us a round trip).
  // A longer message is made whole by copying its head into the slot's first bytes, which no
  // receive ever writes. Slots no larger than a head take one SGE, as before.
  static constexpr std::uint32_t kRecvHeadBytes = 256;
  static constexpr std::uint32_t head_bytes(std::uint32_t slot_size) noexcept {
    return slot_size > kRecvHeadBytes ? kRecvHeadBytes : 0;
  }
  qp_resources(const qp_resources&) = delete;
  qp_resources& operator=(const qp_resources&) = delete;
  ~qp_resources();

  // rdma_migrate_id to channel(): the connection's events then reach the connection's executor.
  // Requires every event already taken for the id to be acknowledged. Throws system_error.
  void migrate_to_own_channel();

  // Posts receive WRs for `slots` (chained, one ibv_post_recv per batch). wr_id = slot index.
  boost::system::error_code post_receives(std::span<const std::uint32_t> slots) noexcept;
  // Posts the whole ring (before rdma_connect / rdma_accept).
  boost::system::error_code post_whole_ring() noexcept;

  // Destroys QP, CQ and completion channel (acknowledging pending CQ events first). The MRs stay,
  // so messages still read in place remain valid until the owner goes away.
  void destroy_queue_pair() noexcept;

  std::byte* slot(std::uint32_t index) const noexcept {
    return ring_memory_.get() + std::size_t{index} * slot_size_;
  }
  // The bytes of a receive of `length` bytes into slot `index`, whole: from its head when they fit
  // there, else from the slot, its head copied in front of the rest first.
  std::span<const std::byte> received(std::uint32_t index, std::uint32_t length) const noexcept {
    std::byte* const s = slot(index);
    if (head_bytes_ == 0) return {s, length};
    const std::byte* const head = heads_ + std::size_t{index} * head_bytes_;
    if (length <= head_bytes_) return {head, length};
    std::memcpy(s, head, head_bytes_);
    return {s, length};
  }
  // The registered send region: send_buffers() * slot_size() bytes, carved up by the connection.
  std::byte* send_memory() const noexcept { return send_memory_.get(); }
  std::size_t send_memory_size() const noexcept { return std::size_t{send_buffers_} * slot_size_; }
  // Registers more memory on this connection's PD (local access only: the source of sends).
  // Throws system_error.
  verbs::memory_region register_send_memory(void* addr, std::size_t length) const;

  rdma_event_channel* channel() const noexcept { return channel_.get(); }
  rdma_cm_id* id() const noexcept { return id_.get(); }
  ibv_comp_channel* comp_channel() const noexcept { return comp_channel_.get(); }
  ibv_cq* cq() const noexcept { return cq_.get(); }
  ibv_qp* qp() const noexcept { return qp_.get(); }
  std::uint32_t ring_lkey() const noexcept { return ring_mr_->lkey; }
  std::uint32_t send_lkey() const noexcept { return send_mr_->lkey; }

  std::uint32_t ring_depth() const noexcept { return ring_depth_; }
  std::uint32_t slot_size() const noexcept { return slot_size_; }
  std::uint32_t send_buffers() const noexcept { return send_buffers_; }
  std::uint32_t max_inline() const noexcept { return max_inline_; }

  // CQ events taken with ibv_get_cq_event but not yet acknowledged (acked in batches).
  void add_unacked_cq_events(unsigned n) noexcept;

 private:
  std::uint32_t ring_depth_;
  std::uint32_t slot_size_;
  std::uint32_t send_buffers_;
  std::uint32_t head_bytes_;  // head_bytes(slot_size_)
  std::uint32_t max_inline_ = 0;
  std::byte* heads_ = nullptr;  // ring_depth_ heads, behind the slots in ring_memory_
  unsigned unacked_cq_events_ = 0;

  verbs::event_channel channel_;
  verbs::cm_id id_;
  verbs::protection_domain pd_;
  memory_budget::lease pinned_;  // the rings' share of options.registered_memory, returned last
  verbs::mapped_pages ring_memory_;
  verbs::memory_region ring_mr_;
  verbs::mapped_pages send_memory_;
  verbs::memory_region send_mr_;
  verbs::completion_channel comp_channel_;
  verbs::completion_queue cq_;
  verbs::queue_pair qp_;
};

}  // namespace rdmarpc::transport::rdma
