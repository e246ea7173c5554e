#include "transport/rdma/cq_reactor.hpp"

#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>

namespace rdmarpc::transport::rdma {
namespace {

// Busy-poll and adaptive modes: empty polls before yielding to the executor, which then runs other
// handlers (other connections' polls among them) and now and then its reactor (an epoll_wait). An
// empty poll costs ~45 instructions on rxe, so a yield comes every ~10 k: as often as with 64
// polls before they got cheaper.
constexpr int kBusyPollSpins = 256;

}  // namespace

cq_reactor::cq_reactor(const boost::asio::any_io_executor& ex, qp_resources& resources, cq_polling mode,
                       spin_window spin, std::uint64_t& wakeups)
    : ex_(ex),
      io_(io_context_of(ex)),
      resources_(resources),
      mode_(mode),
      spin_(spin),
      wakeups_(wakeups),
      watch_(ex, resources.comp_channel()->fd) {}

void cq_reactor::start(const std::shared_ptr<handler>& h) {
  ibv_req_notify_cq(resources_.cq(), 0);
  boost::asio::post(ex_, [this, h] {
    if (mode_ == cq_polling::busy) {
      busy_step(h);
    } else {
      on_readable(h);
    }
  });
}

void cq_reactor::stop() noexcept {
  stopped_ = true;
  watch_.release();
}

void cq_reactor::wait(const std::shared_ptr<handler>& h) {
  if (stopped_) return;
  watch_.async_wait_readable([this, h](const boost::system::error_code& ec) {
    if (!ec) on_readable(h);
  });
}

void cq_reactor::on_readable(const std::shared_ptr<handler>& h) {
  if (stopped_) return;
  // Completions first: what they trigger (a reply, the next call) is posted before the syscalls
  // that consume the event and re-arm the CQ, which then overlap the peer's work instead of
  // lengthening the round trip. The CQ is normally disarmed here (its event is one-shot): anything
  // that completes after this poll is found by the poll after the arm below, or raises an event.
  // If it is armed (start(), or adaptive mode's arm while spinning), a completion during this poll
  // raises an event that consume_events reads now or that wakes the next wait at once.
  const auto woke = mode_ == cq_polling::adaptive ? std::chrono::steady_clock::now()
                                                  : std::chrono::steady_clock::time_point{};
  const std::size_t found = h->poll_completions();
  if (stopped_) return;
  consume_events();
  if (mode_ == cq_polling::adaptive) {
    // Stay awake a while: under load the next completion comes soon, and polling for it costs far
    // less than sleeping and being woken again. How long, the gaps so far tell (spin_window); a
    // stale event (its completion was polled while spinning) tells nothing.
    if (found > 0) {
      spin_.after_gap(woke - last_completion_);
      last_completion_ = std::chrono::steady_clock::now();
    }
    return adaptive_step(h);
  }
  // Arm, then poll until empty: a completion that arrives between the two is either seen by this
  // poll or raises a new event, never lost.
  ibv_req_notify_cq(resources_.cq(), 0);
  h->poll_completions();
  wait(h);
}

void cq_reactor::consume_events() {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  // One read, not a loop until EAGAIN (a wasted syscall per wake-up): the CQ is armed one-shot and
  // re-armed only after this read, so at most one event waits here. Should one ever be left (a
  // completion racing the re-arm), the next wait reports the still-readable fd at once (Asio's
  // async_wait re-registers the edge-triggered fd, which reports what is ready now).
  if (ibv_get_cq_event(resources_.comp_channel(), &cq, &context) != 0) return;
  ++wakeups_;
  resources_.add_unacked_cq_events(1);
  // Adaptive mode arms the CQ while it may go on spinning, so more than one event can wait.
  while (mode_ == cq_polling::adaptive && ibv_get_cq_event(resources_.comp_channel(), &cq, &context) == 0) {
    resources_.add_unacked_cq_events(1);
  }
}

void cq_reactor::adaptive_step(const std::shared_ptr<handler>& h) {
  for (int spin = 0; spin < kBusyPollSpins && !stopped_; ++spin) {
    if (h->poll_completions() > 0) {
      last_completion_ = std::chrono::steady_clock::now();
      break;
    }
  }
  if (stopped_) return;
  if (std::chrono::steady_clock::now() < last_completion_ + spin_.window()) {
    yield([this, h] { adaptive_step(h); });  // let other handlers run
    return;
  }
  // Quiet for a whole spin: arm, poll once more (a completion that came before the arm raised no
  // event), and sleep unless that found work. Armed while still spinning is harmless: the event
  // it raises is read at the next wake-up.
  ibv_req_notify_cq(resources_.cq(), 0);
  if (h->poll_completions() > 0) {
    last_completion_ = std::chrono::steady_clock::now();
    yield([this, h] { adaptive_step(h); });
    return;
  }
  wait(h);
}

void cq_reactor::busy_step(const std::shared_ptr<handler>& h) {
  // Spin on the CQ (user space only, no syscall) until something completes or the spin budget is
  // spent, then yield to the executor so other handlers run. Yielding on every empty poll would
  // cost a trip through the reactor (an epoll_wait) per poll.
  for (int spin = 0; spin < kBusyPollSpins && !stopped_; ++spin) {
    if (h->poll_completions() > 0) break;
  }
  if (stopped_) return;
  yield([this, h] { busy_step(h); });
}

}  // namespace rdmarpc::transport::rdma
