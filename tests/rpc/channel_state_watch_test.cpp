// channel_state_watch by hand on an io_context: which waiters a published state completes, and how
// (completions are posted, never inline), cancellation and waits on a channel that shut down.
#include "rpc/channel_state_watch.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <utility>

using rdmarpc::channel_state;
using rdmarpc::channel_state_watch;

namespace {

struct outcome {
  std::optional<boost::system::error_code> ec;
  channel_state state = channel_state::idle;
};

channel_state_watch::waiter waiter_for(channel_state_watch& watch, channel_state last, outcome& out) {
  return {watch.next_waiter_id(),
          last,
          [&out](boost::system::error_code ec, channel_state s) {
            out.ec = ec;
            out.state = s;
          },
          {}};
}

// Runs what was posted (the io_context stops whenever it runs out of work).
void run_posted(boost::asio::io_context& io) {
  io.restart();
  io.poll();
}

}  // namespace

TEST_CASE("channel_state_watch: a published change completes exactly the waiters that saw another state",
          "[connectivity]") {
  boost::asio::io_context io;
  channel_state_watch watch(io.get_executor());
  CHECK(watch.published() == channel_state::idle);
  outcome saw_idle, saw_connecting, saw_older;
  CHECK(watch.add(waiter_for(watch, channel_state::idle, saw_idle), channel_state::idle));
  watch.publish(channel_state::connecting);
  CHECK(watch.add(waiter_for(watch, channel_state::connecting, saw_connecting), channel_state::connecting));
  CHECK_FALSE(saw_idle.ec);  // posted, not inline
  run_posted(io);
  REQUIRE(saw_idle.ec);
  CHECK_FALSE(*saw_idle.ec);
  CHECK(saw_idle.state == channel_state::connecting);
  CHECK_FALSE(saw_connecting.ec);  // it saw the state published: it waits on
  CHECK(watch.published() == channel_state::connecting);
  watch.publish(channel_state::connecting);  // the same state again: no change
  run_posted(io);
  CHECK_FALSE(saw_connecting.ec);
  watch.publish(channel_state::ready);
  run_posted(io);
  REQUIRE(saw_connecting.ec);
  CHECK(saw_connecting.state == channel_state::ready);
  CHECK_FALSE(watch.has_waiters());
  // One that observed an older state than the current one completes at once (posted).
  CHECK_FALSE(watch.add(waiter_for(watch, channel_state::idle, saw_older), channel_state::ready));
  CHECK_FALSE(saw_older.ec);
  run_posted(io);
  REQUIRE(saw_older.ec);
  CHECK_FALSE(*saw_older.ec);
  CHECK(saw_older.state == channel_state::ready);
}

TEST_CASE("channel_state_watch: cancel and a wait on a shut down channel end with their errors",
          "[connectivity]") {
  boost::asio::io_context io;
  channel_state_watch watch(io.get_executor());
  outcome cancelled, after_shutdown;
  auto w = waiter_for(watch, channel_state::idle, cancelled);
  const std::uint64_t id = w.id;
  REQUIRE(watch.add(std::move(w), channel_state::idle));
  watch.cancel(id + 1, channel_state::idle);  // not waiting: nothing happens
  run_posted(io);
  CHECK_FALSE(cancelled.ec);
  watch.cancel(id, channel_state::idle);
  CHECK_FALSE(cancelled.ec);  // posted, not inline
  run_posted(io);
  REQUIRE(cancelled.ec);
  CHECK(*cancelled.ec == boost::asio::error::operation_aborted);
  CHECK_FALSE(watch.has_waiters());
  watch.publish(channel_state::shutdown);
  CHECK_FALSE(watch.add(waiter_for(watch, channel_state::shutdown, after_shutdown), channel_state::shutdown));
  CHECK_FALSE(after_shutdown.ec);  // posted, not inline
  run_posted(io);
  REQUIRE(after_shutdown.ec);
  CHECK(*after_shutdown.ec == boost::asio::error::shut_down);
}
