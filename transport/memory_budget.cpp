#include "transport/memory_budget.hpp"

namespace rdmarpc::transport {

memory_budget::lease& memory_budget::lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    reset();
    budget_ = std::move(other.budget_);
    bytes_ = other.bytes_;
    other.bytes_ = 0;
  }
  return *this;
}

void memory_budget::lease::reset() noexcept {
  if (budget_) budget_->in_use_.fetch_sub(bytes_, std::memory_order_relaxed);
  budget_.reset();
  bytes_ = 0;
}

std::optional<memory_budget::lease> memory_budget::try_acquire(std::size_t bytes) noexcept {
  std::size_t used = in_use_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || used > limit_ - bytes) return std::nullopt;
  } while (!in_use_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return lease(shared_from_this(), bytes);
}

}  // namespace rdmarpc::transport
