#pragma once
// What ThreadSanitizer cannot see on its own: a message sent over rdma reaches the receiving
// thread through memory the kernel (or the NIC) writes, not through a call TSan intercepts, as it
// does a socket's write and read. So when client and server share a process (as in the rdma tests),
// everything the sender did before sending looks unordered with what the receiver does after
// receiving, and TSan reports races the message itself rules out. The transport says it: a post
// releases, and a receive completion acquires, on a key per receiving queue pair (its number), so
// a message orders what its own connection's messages order and no more (two QP numbers equal in
// their low 16 bits share a key: a little more ordering, never less). Only messages are told:
// rdma_cm's events (connect, disconnect) are not, nor are two ends on two devices; either can only
// cause a report, never hide one. Compiled to nothing without TSan.

#include <infiniband/verbs.h>

#include <cstdint>

#if defined(__SANITIZE_THREAD__)
#define RDMARPC_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RDMARPC_THREAD_SANITIZER 1
#endif
#endif

#if defined(RDMARPC_THREAD_SANITIZER)
#include <sanitizer/tsan_interface.h>
#endif

namespace rdmarpc::transport::rdma::message_ordering {

// One per connection; empty without TSan.
class link {
 public:
  // Before the post of a send: its data, and everything before it, is the receiver's to see.
  [[gnu::always_inline]] void sending([[maybe_unused]] ibv_qp* qp) noexcept {
#if defined(RDMARPC_THREAD_SANITIZER)
    if (peer_key_ == nullptr) peer_key_ = key_of(peer_qp_num(qp));  // connected by the first post
    __tsan_release(peer_key_);
#endif
  }

  // On a receive completion, before anything reads what arrived.
  [[gnu::always_inline]] void received([[maybe_unused]] ibv_qp* qp) noexcept {
#if defined(RDMARPC_THREAD_SANITIZER)
    __tsan_acquire(key_of(qp->qp_num));
#endif
  }

#if defined(RDMARPC_THREAD_SANITIZER)
 private:
  // Addresses only, never read or written: TSan keys its synchronisation objects by address.
  static char* key_of(std::uint32_t qp_num) noexcept {
    static char keys[1u << 16];
    return &keys[qp_num & 0xffffu];
  }
  static std::uint32_t peer_qp_num(ibv_qp* qp) noexcept {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    return ibv_query_qp(qp, &attr, IBV_QP_DEST_QPN, &init) == 0 ? attr.dest_qp_num : 0;
  }

  char* peer_key_ = nullptr;
#endif
};

}  // namespace rdmarpc::transport::rdma::message_ordering
