#pragma once
// lent_pointer<T>: a pointer to an object its giver keeps alive for now (lent), that takes a
// reference (T::keep_alive()) only once it is moved, so it may outlive the giver's call. How a
// delivered message (received_message) and a handler's completion (rpc's server_done) point at
// their connection without two atomic operations each, when used where they were given.
// Layer: transport (used by rpc). Threading: as the object holding it.

#include <cassert>
#include <memory>
#include <utility>

namespace rdmarpc::transport {

template <typename T>
class lent_pointer {
 public:
  lent_pointer() noexcept = default;
  // Lent: `t` stays alive while this is not moved.
  explicit lent_pointer(T& t) noexcept : ptr_(&t) {}
  // Holds a reference already.
  explicit lent_pointer(std::shared_ptr<T> t) noexcept : ptr_(t.get()), alive_(std::move(t)) {}
  lent_pointer(lent_pointer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), alive_(kept_alive(ptr_, other.alive_)) {}
  // (The holder lets go of what this points at before assigning.)
  lent_pointer& operator=(lent_pointer&& other) noexcept {
    ptr_ = std::exchange(other.ptr_, nullptr);
    alive_ = kept_alive(ptr_, other.alive_);
    return *this;
  }
  lent_pointer(const lent_pointer&) = delete;
  lent_pointer& operator=(const lent_pointer&) = delete;

  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  // Points at an object that is lent (no reference held).
  bool lent() const noexcept { return ptr_ != nullptr && !alive_; }

  // Empties this and calls `f(object)` while the reference, if any, is still held.
  template <typename F>
  void let_go(F&& f) noexcept {
    T* const t = std::exchange(ptr_, nullptr);
    if (!alive_) return f(*t);  // lent: no reference to let go of
    const std::shared_ptr<T> alive = std::move(alive_);
    f(*t);
  }

  // This pointer as a new one, still lent if it was (no reference taken); empty afterwards. Only
  // for a prvalue that initializes a parameter, which is then no move.
  lent_pointer handed_on() noexcept { return lent_pointer(*this, handing_on{}); }

 private:
  struct handing_on {};
  lent_pointer(lent_pointer& from, handing_on) noexcept
      : ptr_(std::exchange(from.ptr_, nullptr)), alive_(std::move(from.alive_)) {}
  // A moved pointer's reference: the one it had, or a new one if it was lent.
  static std::shared_ptr<T> kept_alive(T* t, std::shared_ptr<T>& had) noexcept {
    if (t == nullptr || had) return std::move(had);
    std::shared_ptr<T> kept = t->keep_alive();
    assert(kept != nullptr && "an object that lends itself must return a reference from keep_alive");
    return kept;
  }

  T* ptr_ = nullptr;
  std::shared_ptr<T> alive_;  // empty while lent
};

}  // namespace rdmarpc::transport
