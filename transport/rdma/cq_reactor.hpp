#pragma once
// cq_reactor: drives one completion queue from an Asio executor in the connection's polling mode:
// event (arm, poll, sleep on the completion channel), busy (spin on the CQ in user space, yielding
// to the executor between spins) or adaptive (spin for spin_window's time after the last
// completion, then arm and sleep). Layer: transport (rdma). Threading: its executor's only.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/connection.hpp"
#include "transport/io_context_of.hpp"
#include "transport/rdma/fd_watch.hpp"
#include "transport/rdma/qp_resources.hpp"
#include "transport/rdma/spin_window.hpp"

namespace rdmarpc::transport::rdma {

class cq_reactor {
 public:
  class handler {
   public:
    // Polls the CQ until it is empty and handles what it found; returns how many completions.
    virtual std::size_t poll_completions() = 0;

   protected:
    ~handler() = default;
  };

  // `resources` must outlive the reactor (or its stop()). `wakeups` counts completion-channel events.
  cq_reactor(const boost::asio::any_io_executor& ex, qp_resources& resources, cq_polling mode,
             spin_window spin, std::uint64_t& wakeups);

  // Arms the CQ and polls once soon (completions may already wait). Every wait holds `h`, which
  // must own this reactor.
  void start(const std::shared_ptr<handler>& h);
  // No more polls; the completion channel's fd is let go of. Safe from inside poll_completions.
  void stop() noexcept;

 private:
  void wait(const std::shared_ptr<handler>& h);
  void on_readable(const std::shared_ptr<handler>& h);
  void consume_events();  // reads (and counts for acking) what the completion channel holds
  void busy_step(const std::shared_ptr<handler>& h);
  void adaptive_step(const std::shared_ptr<handler>& h);

  // Runs `step` after the handlers queued now (defer: a continuation, kept in this thread's own
  // queue), through the io_context's own executor when there is one: no type-erased dispatch.
  template <typename Step>
  void yield(Step&& step) {
    if (io_ != nullptr) return boost::asio::defer(io_->get_executor(), std::forward<Step>(step));
    boost::asio::defer(ex_, std::forward<Step>(step));
  }

  boost::asio::any_io_executor ex_;
  boost::asio::io_context* io_;  // whose own executor ex_ is (not a strand), or nullptr
  qp_resources& resources_;
  cq_polling mode_;
  spin_window spin_;  // adaptive
  std::uint64_t& wakeups_;
  fd_watch watch_;
  bool stopped_ = false;
  // adaptive: when a poll last found completions (none yet: the first gap counts as a long one).
  std::chrono::steady_clock::time_point last_completion_{};
};

}  // namespace rdmarpc::transport::rdma
