// cm_event_pump's error path, on the host: rdma_get_cm_event fails on an event channel whose fd is
// a readable pipe (without a device librdmacm cannot start; with one the pipe refuses its
// command). That is what the rdma listener meets when a read fails. The handler decides: keep
// pumping (the listener: one failed read must not end every future accept) or stop.
#include "transport/rdma/cm_event_pump.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "tests/transport/connection_contract.hpp"  // run_until

using namespace rdmarpc;
using transport::rdma::cm_event_pump;

namespace {

struct pipe_fds {
  std::array<int, 2> fd{-1, -1};
  pipe_fds() { REQUIRE(::pipe(fd.data()) == 0); }
  ~pipe_fds() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
  // A byte in the pipe: its read end is readable from then on (the pump never reads it).
  void make_readable() const { REQUIRE(::write(fd[1], "x", 1) == 1); }
};

class counting_handler final : public cm_event_pump::handler {
 public:
  counting_handler(boost::asio::io_context& io, rdma_event_channel* channel)
      : pump(io.get_executor(), channel) {}
  void on_cm_event(verbs::cm_event) override { ++events; }
  bool on_cm_error(const boost::system::error_code& ec) override {
    ++errors;
    last_error = ec;
    return keep_pumping;
  }

  cm_event_pump pump;  // owned by its handler, as in the listener
  bool keep_pumping = true;
  int errors = 0;
  int events = 0;
  boost::system::error_code last_error;
};

// Runs what is ready now and what that posts, without waiting for the fd.
void settle(boost::asio::io_context& io) {
  io.restart();
  io.poll();
}

}  // namespace

TEST_CASE("cm_event_pump: a failed read is retried at once, then after pauses - never in a loop",
          "[transport][rdma][cm]") {
  boost::asio::io_context io;
  pipe_fds pipe;
  pipe.make_readable();  // and it stays so: the pump never reads the pipe itself
  rdma_event_channel channel{pipe.fd[0]};
  auto h = std::make_shared<counting_handler>(io, &channel);
  h->pump.start(h);
  settle(io);
  // The first read and its three quick retries, then a pause (a wait for readiness would complete
  // at once on this readable fd: a loop of failing reads, and of error logs).
  CHECK(h->errors == 4);
  CHECK(h->last_error.failed());
  CHECK(h->events == 0);
  CHECK(h->pump.pumping());

  REQUIRE(test::run_until(io, [&] { return h->errors > 4; }));
  settle(io);
  CHECK(h->errors == 5);  // one read after the pause, then the next pause
  CHECK(h->pump.pumping());

  // A handler that says stop: the pump lets go of the fd and reads no more.
  h->keep_pumping = false;
  REQUIRE(test::run_until(io, [&] { return !h->pump.pumping(); }));
  settle(io);
  CHECK(h->errors == 6);
  pipe.make_readable();
  settle(io);
  CHECK(h->errors == 6);
}

TEST_CASE("cm_event_pump: a handler that stops at the first failed read ends the pump at once",
          "[transport][rdma][cm]") {
  boost::asio::io_context io;
  pipe_fds pipe;
  rdma_event_channel channel{pipe.fd[0]};
  auto h = std::make_shared<counting_handler>(io, &channel);
  h->keep_pumping = false;
  h->pump.start(h);
  settle(io);
  CHECK(h->errors == 1);
  CHECK_FALSE(h->pump.pumping());
}

// fd_watch, which the pump and the completion-queue reactor wait with: typed on the io_context's
// executor when there is one, through the type-erased executor otherwise; both wait the same, and
// release() lets go of the fd without closing it.
TEST_CASE("fd_watch: waits for a readable fd on an io_context and on a thread_pool, never closes it",
          "[cm_event_pump][fd_watch]") {
  const auto wait_on = [](const boost::asio::any_io_executor& ex,
                          const std::function<bool(std::atomic<int>&)>& run) {
    pipe_fds p;
    std::atomic<int> woken{0};
    {
      transport::rdma::fd_watch watch(ex, p.fd[0]);
      CHECK(watch.watching());
      watch.async_wait_readable([&woken](const boost::system::error_code& ec) {
        if (!ec) woken.fetch_add(1);
      });
      p.make_readable();
      REQUIRE(run(woken));
      watch.release();
      CHECK_FALSE(watch.watching());
    }
    CHECK(::fcntl(p.fd[0], F_GETFD) != -1);  // still open: the watch did not close it
  };
  boost::asio::io_context io;
  wait_on(io.get_executor(),
          [&](std::atomic<int>& woken) { return test::run_until(io, [&] { return woken == 1; }); });
  boost::asio::thread_pool pool(1);
  wait_on(pool.get_executor(), [](std::atomic<int>& woken) {
    for (int i = 0; i < 1000 && woken == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return woken == 1;
  });
  pool.join();
}
