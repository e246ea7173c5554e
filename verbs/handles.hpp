#pragma once
// RAII owners of the rdma-core objects the rdma transport uses: rdma_cm event channel and cm_id,
// protection domain, memory region (and the mapped pages behind it), completion channel, completion
// queue, queue pair, cm event.
// Layer: verbs (no Asio, no policy). Threading: plain owners; use each from one thread.
// Setup functions throw boost::system::system_error (errno, system category). An owner that holds
// several of these must declare them so they are destroyed as rdma-core's rdma_server.c tears
// down: QP, CQ, completion channel, MR, PD, cm_id, event channel (declare in the reverse order).

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <boost/system/error_code.hpp>
#include <cstddef>
#include <memory>

namespace rdmarpc::verbs {

struct event_channel_deleter {
  void operator()(rdma_event_channel* p) const noexcept { rdma_destroy_event_channel(p); }
};
struct cm_id_deleter {
  void operator()(rdma_cm_id* p) const noexcept { rdma_destroy_id(p); }
};
struct pd_deleter {
  void operator()(ibv_pd* p) const noexcept { ibv_dealloc_pd(p); }
};
struct mr_deleter {
  void operator()(ibv_mr* p) const noexcept { ibv_dereg_mr(p); }
};
struct comp_channel_deleter {
  void operator()(ibv_comp_channel* p) const noexcept { ibv_destroy_comp_channel(p); }
};
struct cq_deleter {
  void operator()(ibv_cq* p) const noexcept { ibv_destroy_cq(p); }
};
// Acknowledging is how rdma_cm events are released (rdma_destroy_id waits for it).
struct cm_event_deleter {
  void operator()(rdma_cm_event* p) const noexcept { rdma_ack_cm_event(p); }
};

using event_channel = std::unique_ptr<rdma_event_channel, event_channel_deleter>;
using cm_id = std::unique_ptr<rdma_cm_id, cm_id_deleter>;
using protection_domain = std::unique_ptr<ibv_pd, pd_deleter>;
using memory_region = std::unique_ptr<ibv_mr, mr_deleter>;
using completion_channel = std::unique_ptr<ibv_comp_channel, comp_channel_deleter>;
using completion_queue = std::unique_ptr<ibv_cq, cq_deleter>;
using cm_event = std::unique_ptr<rdma_cm_event, cm_event_deleter>;

// The QP of a cm_id (rdma_create_qp / rdma_destroy_qp). Does not own the cm_id.
class queue_pair {
 public:
  queue_pair() noexcept = default;
  queue_pair(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr& attr);  // attr.cap is updated to the actual caps
  queue_pair(queue_pair&& other) noexcept : id_(other.id_) { other.id_ = nullptr; }
  queue_pair& operator=(queue_pair&& other) noexcept;
  queue_pair(const queue_pair&) = delete;
  queue_pair& operator=(const queue_pair&) = delete;
  ~queue_pair() { reset(); }

  ibv_qp* get() const noexcept { return id_ != nullptr ? id_->qp : nullptr; }
  explicit operator bool() const noexcept { return get() != nullptr; }
  void reset() noexcept;

 private:
  rdma_cm_id* id_ = nullptr;
};

// Anonymous pages mapped for a memory region's backing store (unmap them after deregistering).
// Mapped rather than taken from malloc: registered memory then shares no page with heap objects,
// and each buffer goes back to the kernel when freed instead of fragmenting the heap (from malloc,
// MiB-sized rings freed and re-made per connection grew a long-running server's heap).
class mapped_pages {
 public:
  mapped_pages() = default;
  // Rounds `bytes` up to whole pages (at least one). Throws std::bad_alloc when mmap fails.
  explicit mapped_pages(std::size_t bytes);
  mapped_pages(mapped_pages&& other) noexcept;
  mapped_pages& operator=(mapped_pages&& other) noexcept;
  mapped_pages(const mapped_pages&) = delete;
  mapped_pages& operator=(const mapped_pages&) = delete;
  ~mapped_pages() { reset(); }

  std::byte* get() const noexcept { return data_; }
  std::size_t mapped_bytes() const noexcept { return mapped_bytes_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }
  void reset() noexcept;

 private:
  std::byte* data_ = nullptr;
  std::size_t mapped_bytes_ = 0;
};

// Event channel whose fd is O_NONBLOCK, so rdma_get_cm_event never blocks (see get_cm_event).
event_channel make_event_channel();
cm_id make_cm_id(rdma_event_channel* channel, void* context = nullptr, rdma_port_space ps = RDMA_PS_TCP);
protection_domain make_protection_domain(ibv_context* context);
memory_region register_memory(ibv_pd* pd, void* addr, std::size_t length, int access);
// Completion channel whose fd is O_NONBLOCK, so ibv_get_cq_event never blocks.
completion_channel make_completion_channel(ibv_context* context);
completion_queue make_completion_queue(ibv_context* context, int entries, ibv_comp_channel* channel);

// Next event on a non-blocking channel: success and `out` set, errc::operation_would_block (generic category)
// when none is pending, or the errno of the failure.
boost::system::error_code get_cm_event(rdma_event_channel* channel, cm_event& out) noexcept;

// Sets O_NONBLOCK on `fd`; throws system_error on failure.
void set_nonblocking(int fd);

}  // namespace rdmarpc::verbs
