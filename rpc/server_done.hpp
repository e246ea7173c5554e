#pragma once
// server_done: the completion a server handler holds for its call. Invoking it finishes the call:
// the reply is sent (or the status set with server_context::set_status). Callback handlers
// (generated CallbackService) get it as a parameter and may invoke it before returning (no
// coroutine, no allocation, no scheduler hop) or later. Layer: rpc.
// Threading: a completion moved out of the handler's parameter may be invoked from any thread;
// the server finishes the call on its connection's executor (at once when invoked there). One not
// moved (the parameter itself, lent) is invoked by the handler on its own thread before it
// returns: to answer from elsewhere, move it there.

#include <cstdint>
#include <exception>
#include <memory>
#include <utility>

#include "transport/lent_pointer.hpp"

namespace rdmarpc {

template <typename Owner, typename Request, typename Reply>
class callback_server_call;

class server_done {
 public:
  // Who finishes the call: the server's connection (a test may implement its own).
  class target {
   public:
    // Call `key` finished. `error`: an exception that escaped the handler (status_error carries
    // its status; anything else answers INTERNAL). Any thread. A key already finished is ignored.
    virtual void call_done(std::uint64_t key, std::exception_ptr error) noexcept = 0;
    // call_done from a lent completion: on the thread running the handler's start(), inside it.
    // Default: call_done.
    virtual void call_done_lent(std::uint64_t key, std::exception_ptr error) noexcept {
      call_done(key, std::move(error));
    }
    // The completion was dropped without being invoked; `unwinding`: while an exception unwound
    // (out of the handler, which the server then answers with, or out of anything else).
    // Default: call_done with INTERNAL.
    virtual void call_dropped(std::uint64_t key, bool unwinding) noexcept;
    // A reference that keeps this target alive: taken when a lent completion is moved. Only asked
    // of a target that lends (the lent constructor); the default, for one that never does, has none.
    virtual std::shared_ptr<target> keep_alive() noexcept { return nullptr; }

   protected:
    ~target() = default;
  };

  // Tags the constructor whose target is lent (see below).
  struct lent_t {
    explicit lent_t() = default;
  };
  static constexpr lent_t lent{};

  server_done() noexcept = default;
  // Holds a reference to `t`.
  server_done(std::shared_ptr<target> t, std::uint64_t key) noexcept : target_(std::move(t)), key_(key) {}
  // Lent: the server keeps `t` alive while the handler's start() runs, so a handler that answers
  // before it returns costs no reference (two atomic operations a call); moving the completion
  // (to answer later, or from another thread) takes one. Invoked lent, it calls call_done_lent.
  server_done(lent_t, target& t, std::uint64_t key) noexcept : target_(t), key_(key) {}
  server_done(server_done&& other) noexcept : target_(std::move(other.target_)), key_(other.key_) {}
  server_done& operator=(server_done&& other) noexcept {
    if (this != &other) {
      if (target_) drop();
      target_ = std::move(other.target_);
      key_ = other.key_;
    }
    return *this;
  }
  server_done(const server_done&) = delete;
  server_done& operator=(const server_done&) = delete;
  // Dropped without being invoked: the call answers INTERNAL ("the handler dropped its
  // completion"), so a forgotten call never leaks. Destroyed while an exception unwinds (any
  // exception in flight on this thread; asked only here, not per call): out of the handler's start,
  // the server answers with that exception instead.
  ~server_done() {
    if (target_) drop();  // the common case (invoked or moved from) costs no call
  }

  // Finishes the call. Call once; the context, request and reply must not be touched afterwards.
  void operator()() noexcept { finish(nullptr); }
  // Finishes the call with an exception (status_error: its status; else INTERNAL).
  void operator()(std::exception_ptr error) noexcept { finish(std::move(error)); }

  // True until invoked (or moved from).
  explicit operator bool() const noexcept { return static_cast<bool>(target_); }

  // (Not for handlers: storage initialized from it would hold no reference.)
  template <typename Owner, typename Request, typename Reply>
  friend class callback_server_call;

 private:
  // This completion as a new one, still lent if it was: how the framework passes it on to the
  // handler (a prvalue argument is not moved). Empty afterwards.
  server_done pass_on() noexcept { return server_done(*this, handing_on{}); }
  struct handing_on {};
  server_done(server_done& from, handing_on) noexcept : target_(from.target_.handed_on()), key_(from.key_) {}
  void finish(std::exception_ptr error) noexcept {
    if (!target_) return;
    if (target_.lent()) return target_.let_go([&](target& t) { t.call_done_lent(key_, std::move(error)); });
    target_.let_go([&](target& t) { t.call_done(key_, std::move(error)); });
  }
  void drop() noexcept;

  transport::lent_pointer<target> target_;  // empty: invoked, moved from, or empty; lent inside start()
  std::uint64_t key_ = 0;
};

}  // namespace rdmarpc
