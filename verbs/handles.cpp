#include "verbs/handles.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/system/system_error.hpp>
#include <cerrno>
#include <limits>
#include <new>
#include <utility>

namespace rdmarpc::verbs {
namespace {

[[noreturn]] void throw_errno(int err, const char* what) {
  throw boost::system::system_error(boost::system::error_code(err, boost::system::system_category()), what);
}

// ibv_* calls return the error number or set errno depending on the call; take whichever is set.
int error_of(int rc) noexcept {
  if (rc > 0) return rc;
  return errno != 0 ? errno : EIO;
}

}  // namespace

queue_pair::queue_pair(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr& attr) {
  if (rdma_create_qp(id, pd, &attr) != 0) throw_errno(error_of(-1), "rdma_create_qp");
  id_ = id;
}

queue_pair& queue_pair::operator=(queue_pair&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    other.id_ = nullptr;
  }
  return *this;
}

void queue_pair::reset() noexcept {
  if (id_ != nullptr && id_->qp != nullptr) rdma_destroy_qp(id_);
  id_ = nullptr;
}

mapped_pages::mapped_pages(std::size_t bytes) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::size_t page_bytes = page > 0 ? static_cast<std::size_t>(page) : 4096;
  if (bytes > std::numeric_limits<std::size_t>::max() - page_bytes)
    throw std::bad_alloc();  // rounding overflows
  const std::size_t rounded = bytes == 0 ? page_bytes : (bytes + page_bytes - 1) / page_bytes * page_bytes;
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<std::byte*>(p);
  mapped_bytes_ = rounded;
}

mapped_pages::mapped_pages(mapped_pages&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

mapped_pages& mapped_pages::operator=(mapped_pages&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

void mapped_pages::reset() noexcept {
  if (data_ != nullptr) ::munmap(data_, mapped_bytes_);
  data_ = nullptr;
  mapped_bytes_ = 0;
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throw_errno(errno, "fcntl(O_NONBLOCK)");
}

event_channel make_event_channel() {
  event_channel channel(rdma_create_event_channel());
  if (!channel) throw_errno(error_of(-1), "rdma_create_event_channel");
  set_nonblocking(channel->fd);
  return channel;
}

cm_id make_cm_id(rdma_event_channel* channel, void* context, rdma_port_space ps) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel, &id, context, ps) != 0) throw_errno(error_of(-1), "rdma_create_id");
  return cm_id(id);
}

protection_domain make_protection_domain(ibv_context* context) {
  protection_domain pd(ibv_alloc_pd(context));
  if (!pd) throw_errno(error_of(-1), "ibv_alloc_pd");
  return pd;
}

memory_region register_memory(ibv_pd* pd, void* addr, std::size_t length, int access) {
  memory_region mr(ibv_reg_mr(pd, addr, length, access));
  if (!mr) throw_errno(error_of(-1), "ibv_reg_mr");
  return mr;
}

completion_channel make_completion_channel(ibv_context* context) {
  completion_channel channel(ibv_create_comp_channel(context));
  if (!channel) throw_errno(error_of(-1), "ibv_create_comp_channel");
  set_nonblocking(channel->fd);
  return channel;
}

completion_queue make_completion_queue(ibv_context* context, int entries, ibv_comp_channel* channel) {
  completion_queue cq(ibv_create_cq(context, entries, nullptr, channel, 0));
  if (!cq) throw_errno(error_of(-1), "ibv_create_cq");
  return cq;
}

boost::system::error_code get_cm_event(rdma_event_channel* channel, cm_event& out) noexcept {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(channel, &event) != 0) {
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK)
      return boost::system::errc::make_error_code(boost::system::errc::operation_would_block);
    return {err != 0 ? err : EIO, boost::system::system_category()};
  }
  out.reset(event);
  return {};
}

}  // namespace rdmarpc::verbs
