#include "transport/rdma/qp_resources.hpp"

#include <algorithm>
#include <array>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/rdma/wire.hpp"

namespace rdmarpc::transport::rdma {
namespace {

constexpr std::uint32_t kRecvBatch = 64;  // receive WRs chained into one ibv_post_recv
// Inline sends (the NIC copies the bytes at post time, no DMA read of the buffer) up to the first
// of these sizes the device accepts: a 64 B call's frame is ~100 B.
constexpr std::array<std::uint32_t, 4> kWantedInline{256, 128, 64, 0};
constexpr unsigned kCqEventAckBatch = 32;  // ibv_ack_cq_events takes a mutex: batch it

// "rdma: connection_options::NAME = VALUE " + `why`.
[[noreturn]] void bad_setting(const char* name, std::uint64_t value, const std::string& why) {
  throw std::invalid_argument("rdma: connection_options::" + std::string(name) + " = " +
                              std::to_string(value) + " " + why);
}

std::string outside(std::uint64_t low, std::string high) {
  return "is outside [" + std::to_string(low) + ", " + high + "]";
}

}  // namespace

void qp_resources::check_options(const connection_options& o) {
  if (o.recv_ring_depth < wire::kMinRingDepth || o.recv_ring_depth > wire::kMaxRingDepth)
    bad_setting("recv_ring_depth", o.recv_ring_depth,
                outside(wire::kMinRingDepth, std::to_string(wire::kMaxRingDepth)));
  if (o.slot_size < wire::kMinSlotSize || o.slot_size > wire::kMaxSlotSize)
    bad_setting("slot_size", o.slot_size, outside(wire::kMinSlotSize, std::to_string(wire::kMaxSlotSize)));
  // (Also the send queue's depth, and with the receive ring the CQ's, which verbs takes as an int.)
  if (o.send_buffers < 2 || o.send_buffers > wire::kMaxRingDepth)
    bad_setting("send_buffers", o.send_buffers, outside(2, std::to_string(wire::kMaxRingDepth)));
  if (o.signal_every < 1 || o.signal_every > o.send_buffers)
    bad_setting("signal_every", o.signal_every,
                outside(1, "send_buffers = " + std::to_string(o.send_buffers)));
  // Rings larger than the whole registered-memory budget could never be leased: every connection
  // would be rejected.
  if (o.registered_memory && registered_bytes(o) > o.registered_memory->limit())
    throw std::invalid_argument("rdma: the rings of one connection take " +
                                std::to_string(registered_bytes(o)) +
                                " bytes of registered memory, more than its limit of " +
                                std::to_string(o.registered_memory->limit()));
}

qp_resources::qp_resources(verbs::event_channel channel, verbs::cm_id id, const connection_options& options)
    : ring_depth_(options.recv_ring_depth),
      slot_size_(options.slot_size),
      send_buffers_(options.send_buffers),
      head_bytes_(head_bytes(options.slot_size)),
      channel_(std::move(channel)),
      id_(std::move(id)) {
  check_options(options);
  ibv_context* ctx = id_->verbs;
  if (ctx == nullptr) throw std::invalid_argument("rdma: cm_id is not bound to a device");
  const std::size_t ring_bytes = receive_ring_bytes(options);
  const std::size_t send_bytes = send_ring_bytes(options);
  if (options.registered_memory) {
    auto granted = options.registered_memory->try_acquire(ring_bytes + send_bytes);
    if (!granted) {
      throw boost::system::system_error(
          make_error_code(errc::registered_memory_exhausted),
          "rdma: " + std::to_string(ring_bytes + send_bytes) + " bytes of rings with " +
              std::to_string(options.registered_memory->in_use()) + " of " +
              std::to_string(options.registered_memory->limit()) + " registered bytes in use");
    }
    pinned_ = std::move(*granted);
  }
  pd_ = verbs::make_protection_domain(ctx);
  ring_memory_ = verbs::mapped_pages(ring_bytes);
  // Local write only: the peer can send into our ring but never read or write it remotely.
  ring_mr_ = verbs::register_memory(pd_.get(), ring_memory_.get(), ring_bytes, IBV_ACCESS_LOCAL_WRITE);
  heads_ = ring_memory_.get() + std::size_t{ring_depth_} * slot_size_;
  send_memory_ = verbs::mapped_pages(send_bytes);
  send_mr_ = verbs::register_memory(pd_.get(), send_memory_.get(), send_bytes, 0);
  comp_channel_ = verbs::make_completion_channel(ctx);
  cq_ = verbs::make_completion_queue(ctx, static_cast<int>(ring_depth_ + send_buffers_ + 1),
                                     comp_channel_.get());

  ibv_qp_init_attr attr{};
  attr.send_cq = cq_.get();
  attr.recv_cq = cq_.get();
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;  // selective signaling
  attr.cap.max_send_wr = send_buffers_;
  attr.cap.max_recv_wr = ring_depth_;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = head_bytes_ > 0 ? 2 : 1;
  for (std::size_t i = 0; i < kWantedInline.size(); ++i) {
    attr.cap.max_inline_data = kWantedInline[i];
    try {
      qp_ = verbs::queue_pair(id_.get(), pd_.get(), attr);
      break;
    } catch (const boost::system::system_error&) {
      // Devices differ in how much inline data they allow (some none): try the next size.
      if (i + 1 == kWantedInline.size()) throw;
    }
  }
  max_inline_ = attr.cap.max_inline_data;
}

qp_resources::~qp_resources() {
  destroy_queue_pair();
}

void qp_resources::migrate_to_own_channel() {
  if (id_->channel != channel_.get() && rdma_migrate_id(id_.get(), channel_.get()) != 0)
    throw boost::system::system_error(boost::system::error_code(errno, boost::system::system_category()),
                                      "rdma_migrate_id");
}

boost::system::error_code qp_resources::post_receives(std::span<const std::uint32_t> slots) noexcept {
  std::array<ibv_recv_wr, kRecvBatch> wrs;
  std::array<std::array<ibv_sge, 2>, kRecvBatch> sges;
  const int num_sge = head_bytes_ > 0 ? 2 : 1;
  while (!slots.empty()) {
    const std::size_t n = std::min<std::size_t>(slots.size(), kRecvBatch);
    for (std::size_t i = 0; i < n; ++i) {
      const auto slot_start = reinterpret_cast<std::uintptr_t>(slot(slots[i]));
      if (head_bytes_ > 0) {
        // Head first, then the slot's remainder behind its own first head_bytes_ (kept free for
        // received() to copy the head into).
        sges[i][0] = ibv_sge{reinterpret_cast<std::uintptr_t>(heads_ + std::size_t{slots[i]} * head_bytes_),
                             head_bytes_, ring_mr_->lkey};
        sges[i][1] = ibv_sge{slot_start + head_bytes_, slot_size_ - head_bytes_, ring_mr_->lkey};
      } else {
        sges[i][0] = ibv_sge{slot_start, slot_size_, ring_mr_->lkey};
      }
      wrs[i] = ibv_recv_wr{};
      wrs[i].wr_id = slots[i];
      wrs[i].sg_list = sges[i].data();
      wrs[i].num_sge = num_sge;
      wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (const int rc = ibv_post_recv(qp_.get(), wrs.data(), &bad); rc != 0)
      return {rc, boost::system::system_category()};
    slots = slots.subspan(n);
  }
  return {};
}

boost::system::error_code qp_resources::post_whole_ring() noexcept {
  std::vector<std::uint32_t> all(ring_depth_);
  std::iota(all.begin(), all.end(), 0u);
  return post_receives(all);
}

verbs::memory_region qp_resources::register_send_memory(void* addr, std::size_t length) const {
  return verbs::register_memory(pd_.get(), addr, length, 0);
}

void qp_resources::add_unacked_cq_events(unsigned n) noexcept {
  unacked_cq_events_ += n;
  if (unacked_cq_events_ >= kCqEventAckBatch && cq_) {
    ibv_ack_cq_events(cq_.get(), unacked_cq_events_);
    unacked_cq_events_ = 0;
  }
}

void qp_resources::destroy_queue_pair() noexcept {
  qp_.reset();
  if (cq_ && unacked_cq_events_ > 0) ibv_ack_cq_events(cq_.get(), unacked_cq_events_);
  unacked_cq_events_ = 0;
  cq_.reset();
  comp_channel_.reset();
}

}  // namespace rdmarpc::transport::rdma
