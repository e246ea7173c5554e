#pragma once
// memory_budget: a bound on the bytes of RDMA-registered (pinned) memory that the connections
// sharing it may hold at once. Give one budget to every server and channel of a process (their
// connection_options::registered_memory) and it bounds the process; a server without one gets its
// own (server_options::max_registered_memory). A lease is a grant, returned when it is destroyed.
// Layer: transport. Threading: any thread (one atomic counter).

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>

namespace rdmarpc::transport {

class memory_budget : public std::enable_shared_from_this<memory_budget> {
 public:
  // Bytes held by leases now, at most limit().
  class lease {
   public:
    lease() noexcept = default;
    lease(lease&& other) noexcept : budget_(std::move(other.budget_)), bytes_(other.bytes_) {
      other.bytes_ = 0;
    }
    lease& operator=(lease&& other) noexcept;
    ~lease() { reset(); }
    std::size_t bytes() const noexcept { return bytes_; }
    void reset() noexcept;

   private:
    friend class memory_budget;
    lease(std::shared_ptr<memory_budget> budget, std::size_t bytes) noexcept
        : budget_(std::move(budget)), bytes_(bytes) {}
    std::shared_ptr<memory_budget> budget_;
    std::size_t bytes_ = 0;
  };

  static std::shared_ptr<memory_budget> create(std::size_t limit) {
    return std::shared_ptr<memory_budget>(new memory_budget(limit));
  }

  // A lease of `bytes`, or nothing when that would take the budget past its limit.
  std::optional<lease> try_acquire(std::size_t bytes) noexcept;

  // Whether a lease of `bytes` would be granted now (another thread may take it first).
  bool would_fit(std::size_t bytes) const noexcept { return bytes <= limit_ && in_use() <= limit_ - bytes; }

  std::size_t limit() const noexcept { return limit_; }
  std::size_t in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }

 private:
  explicit memory_budget(std::size_t limit) noexcept : limit_(limit) {}
  const std::size_t limit_;
  std::atomic<std::size_t> in_use_{0};
};

}  // namespace rdmarpc::transport
