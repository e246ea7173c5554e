#pragma once
// The transport::connection contract as reusable test bodies: every implementation (loopback,
// tcp, rdma) runs the same assertions through RDMARPC_CONNECTION_CONTRACT_TESTS with a factory that
// returns a connected (client, server) pair on an io_context. Test code only (Catch2 v2).
// Threading: single-threaded; every test drives its io_context from the test thread.
//
// Assumptions the bodies make about any transport (all part of the contract in connection.hpp):
//  * neither end of a fresh pair is started; a connection that is not started delivers nothing and
//    so does not consume what its peer sends (that is how back-pressure is provoked);
//  * options.max_message_size is honoured by both ends, and a sender's room is bounded (tcp and
//    loopback by options.send_queue_bytes, rdma by its send ring and its peer's credits).

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "transport/connection.hpp"
#include "transport/error.hpp"

namespace rdmarpc::test {

struct connected_pair {
  std::shared_ptr<transport::connection> client;
  std::shared_ptr<transport::connection> server;
};

// Builds a connected pair, both ends on `io`, neither started. May run `io` to connect.
using pair_factory =
    std::function<connected_pair(boost::asio::io_context& io, const transport::connection_options& options)>;

// Runs `io` until `done()` or the timeout (a bound against hangs, never a latency assertion).
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::steady_clock::duration timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto guard = boost::asio::make_work_guard(io);  // run_one_for waits for work instead of returning
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Runs whatever is ready now (and what that makes ready), without waiting.
inline void run_ready(boost::asio::io_context& io) {
  if (io.stopped()) io.restart();
  io.poll();
}

// A test message: bytes derived from (index, size) so that order and content can both be checked.
inline std::vector<std::byte> make_message(std::uint64_t index, std::size_t size) {
  std::vector<std::byte> out(size);
  for (std::size_t i = 0; i < size; ++i)
    out[i] = static_cast<std::byte>((index * 131 + i * 7 + (i >> 8)) & 0xff);
  for (std::size_t i = 0; i < size && i < 8; ++i) out[i] = static_cast<std::byte>((index >> (8 * i)) & 0xff);
  return out;
}
inline bool is_message(const std::vector<std::byte>& got, std::uint64_t index, std::size_t size) {
  return got == make_message(index, size);
}

// Set while the test is inside a connection call; handlers check it to prove they never run inline.
struct call_guard {
  bool active = false;
};

// Records what a connection delivers. Copies each message and releases it at once (on rdma a held
// message pins a receive slot).
class recording_handler : public transport::connection_handler {
 public:
  explicit recording_handler(const call_guard* guard = nullptr) : guard_(guard) {}

  void on_message(transport::received_message message) override {
    if (guard_ != nullptr && guard_->active) ++inline_calls;
    if (close_calls > 0) ++messages_after_close;
    messages.emplace_back(message.bytes().begin(), message.bytes().end());
    message.release();
    if (on_message_hook) on_message_hook(messages.size());
  }
  void on_close(const boost::system::error_code& reason) override {
    if (guard_ != nullptr && guard_->active) ++inline_calls;
    ++close_calls;
    close_reason = reason;
  }

  std::vector<std::vector<std::byte>> messages;
  int close_calls = 0;
  boost::system::error_code close_reason;
  int inline_calls = 0;
  int messages_after_close = 0;
  std::function<void(std::size_t)> on_message_hook;  // called with the count after each message

 private:
  const call_guard* guard_;
};

inline boost::system::error_code send_bytes(transport::connection& c, const std::vector<std::byte>& bytes) {
  return c.send_copy(boost::asio::buffer(bytes));
}

// Writes `bytes` into `r` (exactly their size) and commits it.
inline void commit_bytes(transport::send_reservation r, const std::vector<std::byte>& bytes) {
  REQUIRE(r.size() == bytes.size());
  if (!bytes.empty()) std::memcpy(r.data().data(), bytes.data(), bytes.size());
  r.commit();
}

// Sends `bytes`, waiting for room with async_reserve (running `io`) when there is none now.
inline boost::system::error_code send_waiting(boost::asio::io_context& io, transport::connection& c,
                                              const std::vector<std::byte>& bytes) {
  const auto ec = send_bytes(c, bytes);
  if (ec != boost::asio::error::would_block) return ec;
  std::optional<boost::system::error_code> granted;
  c.async_reserve(bytes.size(), [&](boost::system::error_code e, transport::send_reservation r) {
    granted = e;
    if (!e) commit_bytes(std::move(r), bytes);
  });
  if (!run_until(io, [&] { return granted.has_value(); })) return boost::asio::error::timed_out;
  return *granted;
}

// Sends messages [0, count) of size size_of(i) through reservations, waiting with async_reserve
// whenever there is no room. Finishes with `error` set if anything but would_block came back.
class blaster : public std::enable_shared_from_this<blaster> {
 public:
  blaster(std::shared_ptr<transport::connection> c, std::uint64_t count,
          std::function<std::size_t(std::uint64_t)> size_of)
      : connection_(std::move(c)), count_(count), size_of_(std::move(size_of)) {}
  void run() {
    while (next < count_) {
      const auto message = make_message(next, size_of_(next));
      boost::system::error_code ec;
      auto r = connection_->try_reserve(message.size(), ec);
      if (ec == boost::asio::error::would_block) {
        ++full_count;
        connection_->async_reserve(
            message.size(), [self = shared_from_this()](boost::system::error_code wait_ec,
                                                        transport::send_reservation granted) {
              if (wait_ec) {
                self->error = wait_ec;
                return;
              }
              commit_bytes(std::move(granted), make_message(self->next, self->size_of_(self->next)));
              ++self->next;
              self->run();
            });
        return;
      }
      if (ec) {
        error = ec;
        return;
      }
      commit_bytes(std::move(r), message);
      ++next;
    }
  }
  std::uint64_t next = 0;
  std::uint64_t full_count = 0;
  boost::system::error_code error;

 private:
  std::shared_ptr<transport::connection> connection_;
  std::uint64_t count_;
  std::function<std::size_t(std::uint64_t)> size_of_;
};

// --- the contract ------------------------------------------------------------------------------

inline void contract_start_and_not_connected(const pair_factory& make) {
  boost::asio::io_context io;
  auto pair = make(io, {});
  const std::vector<std::byte> one(1, std::byte{7});
  CHECK(send_bytes(*pair.client, one) == transport::errc::not_connected);  // not started yet
  CHECK_FALSE(pair.client->is_open());
  auto ch = std::make_shared<recording_handler>();
  auto sh = std::make_shared<recording_handler>();
  pair.client->start(ch);
  pair.server->start(sh);
  CHECK(pair.client->is_open());
  CHECK(pair.server->is_open());
  CHECK(pair.client->max_message_size() == transport::connection_options{}.max_message_size);
  CHECK_FALSE(pair.client->remote_address().empty());
  REQUIRE_FALSE(send_bytes(*pair.client, one));
  REQUIRE(run_until(io, [&] { return sh->messages.size() == 1; }));
  CHECK(sh->messages[0] == one);
  pair.client->close();
  pair.server->close();
  REQUIRE(run_until(io, [&] { return ch->close_calls == 1 && sh->close_calls == 1; }));
}

inline void contract_ordered_delivery(const pair_factory& make) {
  boost::asio::io_context io;
  transport::connection_options options;
  options.send_queue_bytes = 8 * 1024;          // tcp and loopback push back at once; rdma by credits
  options.tcp_socket_buffer_bytes = 16 * 1024;  // else the kernel absorbs everything tcp writes
  auto pair = make(io, options);
  auto ch = std::make_shared<recording_handler>();
  auto sh = std::make_shared<recording_handler>();
  pair.client->start(ch);
  pair.server->start(sh);
  constexpr std::uint64_t kCount = 20000;
  const auto size_of = [](std::uint64_t i) { return static_cast<std::size_t>((i * 37) % 300); };
  auto up = std::make_shared<blaster>(pair.client, kCount, size_of);
  auto down = std::make_shared<blaster>(pair.server, kCount, size_of);
  up->run();
  down->run();
  REQUIRE(run_until(io, [&] {
    return (sh->messages.size() == kCount && ch->messages.size() == kCount) || up->error || down->error;
  }));
  REQUIRE_FALSE(up->error);
  REQUIRE_FALSE(down->error);
  CHECK(up->full_count > 0);  // the sender ran out of room: back-pressure was exercised on the way
  std::uint64_t bad_up = 0, bad_down = 0, bytes = 0;
  for (std::uint64_t i = 0; i < kCount; ++i) {
    if (!is_message(sh->messages[i], i, size_of(i))) ++bad_up;
    if (!is_message(ch->messages[i], i, size_of(i))) ++bad_down;
    bytes += size_of(i);
  }
  CHECK(bad_up == 0);
  CHECK(bad_down == 0);
  // Counters add up (senders count when a message leaves their queue, so let that finish).
  REQUIRE(run_until(io, [&] {
    return pair.client->stats().messages_sent == kCount && pair.server->stats().messages_sent == kCount;
  }));
  for (const auto* c : {pair.client.get(), pair.server.get()}) {
    CHECK(c->stats().messages_sent == kCount);
    CHECK(c->stats().messages_received == kCount);
    CHECK(c->stats().bytes_sent == bytes);
    CHECK(c->stats().bytes_received == bytes);
    CHECK(c->stats().rnr_errors == 0);
  }
  CHECK(ch->close_calls == 0);
  CHECK(sh->close_calls == 0);
  pair.client->close();
  REQUIRE(run_until(io, [&] { return ch->close_calls == 1 && sh->close_calls == 1; }));
}

// Keeps every message it is given, unreleased, until the test lets go of them.
class holding_handler : public transport::connection_handler {
 public:
  void on_message(transport::received_message message) override { held.push_back(std::move(message)); }
  void on_close(const boost::system::error_code&) override { ++close_calls; }

  std::vector<transport::received_message> held;
  int close_calls = 0;
};

// Messages the receiver keeps (zero copy: they may live in the transport's receive memory) still
// read as sent while many more arrive after them, and the connection carries on once they are
// released. Large and small alternate, each sent after the previous one arrived, so tcp reads each
// on its own and runs out of read buffers to lend (it copies the rest out); rdma pins a receive
// slot per small one (fewer than its ring holds).
// One kept past the connection's end keeps the connection alive until it is released.
// (Its shape, named for transports' own static checks that it reaches what it means to.)
inline constexpr std::size_t kHeldMessages = 24, kHeldLargeBytes = 40 * 1024, kHeldSmallBytes = 100;
inline void contract_held_messages(const pair_factory& make) {
  boost::asio::io_context io;
  auto pair = make(io, {});
  auto sh = std::make_shared<holding_handler>();
  pair.client->start(std::make_shared<recording_handler>());
  pair.server->start(sh);
  constexpr std::size_t kMessages = kHeldMessages;
  const auto size_of = [](std::size_t i) { return i % 2 == 0 ? kHeldLargeBytes : kHeldSmallBytes; };
  for (std::size_t i = 0; i < kMessages; ++i) {
    REQUIRE_FALSE(send_waiting(io, *pair.client, make_message(i, size_of(i))));
    REQUIRE(run_until(io, [&] { return sh->held.size() == i + 1; }));
  }
  const auto held_reads_as = [&](std::size_t at, std::uint64_t index, std::size_t size) {
    const auto bytes = sh->held[at].bytes();
    return is_message(std::vector<std::byte>(bytes.begin(), bytes.end()), index, size);
  };
  for (std::size_t i = 0; i < kMessages; ++i) {
    CAPTURE(i);
    CHECK(held_reads_as(i, i, size_of(i)));
  }
  // Released out of order; then more traffic goes through as usual.
  for (std::size_t i = 0; i < kMessages; i += 2) sh->held[i].release();
  for (std::size_t i = 1; i < kMessages; i += 2) sh->held[i].release();
  sh->held.clear();
  for (std::size_t i = 0; i < 4; ++i) {
    REQUIRE_FALSE(send_waiting(io, *pair.client, make_message(100 + i, size_of(i))));
    REQUIRE(run_until(io, [&] { return sh->held.size() == i + 1; }));
    CHECK(held_reads_as(i, 100 + i, size_of(i)));
  }
  // A message kept past its connection's end keeps the connection alive (on_message lends it; the
  // handler's move took a reference): it still reads as sent, and releases into a live owner.
  transport::received_message kept = std::move(sh->held.back());
  sh->held.clear();
  const std::weak_ptr<transport::connection> server = pair.server;
  pair.client->close();
  REQUIRE(run_until(io, [&] { return sh->close_calls == 1; }));
  pair.server.reset();
  run_ready(io);
  CHECK_FALSE(server.expired());
  const auto kept_bytes = kept.bytes();
  CHECK(is_message(std::vector<std::byte>(kept_bytes.begin(), kept_bytes.end()), 103, size_of(3)));
  kept.release();
  CHECK(kept.empty());
}

inline void contract_message_sizes(const pair_factory& make) {
  boost::asio::io_context io;
  transport::connection_options options;  // default max: 16 MiB
  auto pair = make(io, options);
  auto sh = std::make_shared<recording_handler>();
  pair.client->start(std::make_shared<recording_handler>());
  pair.server->start(sh);
  const std::vector<std::size_t> sizes{0, 1, 8192, 8193, std::size_t{1} << 20, options.max_message_size, 5};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(sizes[i]);
    REQUIRE_FALSE(send_waiting(io, *pair.client, make_message(i, sizes[i])));
  }
  REQUIRE(run_until(io, [&] { return sh->messages.size() == sizes.size(); }));
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(sizes[i]);
    CHECK(sh->messages[i].size() == sizes[i]);
    CHECK(is_message(sh->messages[i], i, sizes[i]));
  }
  // Gathered parts arrive as one message.
  const auto whole = make_message(99, 3000);
  const std::array<boost::asio::const_buffer, 3> parts{boost::asio::buffer(whole.data(), 1000),
                                                       boost::asio::buffer(whole.data() + 1000, 0),
                                                       boost::asio::buffer(whole.data() + 1000, 2000)};
  REQUIRE_FALSE(pair.client->send_copy(std::span<const boost::asio::const_buffer>(parts)));
  REQUIRE(run_until(io, [&] { return sh->messages.size() == sizes.size() + 1; }));
  CHECK(sh->messages.back() == whole);
  pair.client->close();
  REQUIRE(run_until(io, [&] { return sh->close_calls == 1; }));
}

inline void contract_too_large(const pair_factory& make) {
  boost::asio::io_context io;
  transport::connection_options options;
  options.max_message_size = 64 * 1024;
  auto pair = make(io, options);
  auto sh = std::make_shared<recording_handler>();
  pair.client->start(std::make_shared<recording_handler>());
  pair.server->start(sh);
  CHECK(pair.client->max_message_size() == options.max_message_size);
  const auto big = make_message(1, options.max_message_size + 1);
  CHECK(send_bytes(*pair.client, big) == transport::errc::message_too_large);
  // Gathered parts count as a whole.
  const std::array<boost::asio::const_buffer, 2> parts{boost::asio::buffer(big.data(), 40000),
                                                       boost::asio::buffer(big.data() + 40000, 30000)};
  CHECK(pair.client->send_copy(std::span<const boost::asio::const_buffer>(parts)) ==
        transport::errc::message_too_large);
  boost::system::error_code ec;
  CHECK_FALSE(pair.client->try_reserve(options.max_message_size + 1, ec));
  CHECK(ec == transport::errc::message_too_large);
  std::optional<boost::system::error_code> waited;
  pair.client->async_reserve(options.max_message_size + 1,
                             [&](boost::system::error_code e, transport::send_reservation) { waited = e; });
  CHECK_FALSE(waited);  // never inline
  REQUIRE(run_until(io, [&] { return waited.has_value(); }));
  CHECK(*waited == transport::errc::message_too_large);
  CHECK(pair.client->is_open());  // refused, not fatal
  const auto marker = make_message(2, 10);
  REQUIRE_FALSE(send_bytes(*pair.client, marker));
  REQUIRE(run_until(io, [&] { return sh->messages.size() == 1 && pair.client->stats().messages_sent == 1; }));
  CHECK(sh->messages[0] == marker);  // nothing of the refused messages went out
  CHECK(pair.client->stats().bytes_sent == marker.size());
  pair.client->close();
  REQUIRE(run_until(io, [&] { return sh->close_calls == 1; }));
  CHECK(sh->messages.size() == 1);
}

// A pair whose client is started and whose server is not (it consumes nothing), with the
// client's room used up by kSize-byte messages numbered 0..accepted-1.
struct stalled_client {
  static constexpr std::size_t kSize = 128 * 1024;

  explicit stalled_client(const pair_factory& make) {
    transport::connection_options options;
    options.send_queue_bytes = 4 * kSize;
    pair = make(io, options);
    pair.client->start(ch);
    boost::system::error_code ec;
    for (; accepted < 4096; ++accepted) {  // bounded: a transport that never pushes back fails here
      ec = send_bytes(*pair.client, make_message(accepted, kSize));
      if (ec) break;
      run_ready(io);  // let the transport move what it can towards the peer
    }
    REQUIRE(ec == boost::asio::error::would_block);
  }

  boost::asio::io_context io;
  connected_pair pair;
  std::shared_ptr<recording_handler> ch = std::make_shared<recording_handler>();
  std::uint64_t accepted = 0;
};

// async_reserve: waits for room instead of failing, is cancellable while it waits, never
// completes inline, serves waiters in order, and try_reserve does not overtake a waiter.
inline void contract_back_pressure(const pair_factory& make) {
  stalled_client f(make);
  auto& [io, pair, ch, accepted] = f;
  constexpr std::size_t kSize = stalled_client::kSize;
  CHECK(pair.client->is_open());

  // Per-operation cancellation: the wait ends with operation_aborted and harms nothing.
  boost::asio::cancellation_signal cancel;
  std::optional<boost::system::error_code> cancelled;
  pair.client->async_reserve(
      kSize, boost::asio::bind_cancellation_slot(
                 cancel.slot(), [&](boost::system::error_code e, transport::send_reservation r) {
                   cancelled = e;
                   CHECK_FALSE(r);
                 }));
  CHECK_FALSE(cancelled);  // never inline
  cancel.emit(boost::asio::cancellation_type::terminal);
  REQUIRE(run_until(io, [&] { return cancelled.has_value(); }));
  CHECK(*cancelled == boost::asio::error::operation_aborted);

  // A wait whose handler runs on another io_context keeps that one from running out of work until
  // the handler is on its way there; then lets it stop.
  boost::asio::io_context elsewhere;
  boost::asio::cancellation_signal cancel_elsewhere;
  std::optional<boost::system::error_code> ended_elsewhere;
  pair.client->async_reserve(
      kSize, boost::asio::bind_executor(
                 elsewhere,
                 boost::asio::bind_cancellation_slot(
                     cancel_elsewhere.slot(), [&](boost::system::error_code e, transport::send_reservation) {
                       ended_elsewhere = e;
                     })));
  CHECK(elsewhere.poll() == 0);
  CHECK_FALSE(elsewhere.stopped());  // it waits for the reservation's handler
  cancel_elsewhere.emit(boost::asio::cancellation_type::terminal);
  REQUIRE(run_until(io, [&] {
    elsewhere.poll();
    return ended_elsewhere.has_value();
  }));
  CHECK(*ended_elsewhere == boost::asio::error::operation_aborted);
  io.poll();  // (the cancelled entry leaves the queue)
  CHECK(elsewhere.poll() == 0);
  CHECK(elsewhere.stopped());  // nothing of it keeps the other io_context busy any more

  // A chain of waiters behind the full queue is served in order once the peer consumes.
  constexpr std::uint64_t kWaiting = 6;
  std::uint64_t granted = 0;
  std::optional<boost::system::error_code> failure;
  bool in_call = true, completed_inline = false;
  for (std::uint64_t i = 0; i < kWaiting; ++i) {
    pair.client->async_reserve(kSize, [&, i](boost::system::error_code e, transport::send_reservation r) {
      if (in_call) completed_inline = true;
      if (e) {
        failure = e;
        return;
      }
      CHECK(i == granted);  // first come, first served
      commit_bytes(std::move(r), make_message(accepted + i, kSize));
      ++granted;
    });
  }
  in_call = false;
  CHECK_FALSE(completed_inline);
  // One more, whose handler runs on another io_context: granted there, which never stops meanwhile.
  boost::asio::io_context granted_elsewhere;
  bool granted_there = false;
  pair.client->async_reserve(
      kSize, boost::asio::bind_executor(
                 granted_elsewhere, [&](boost::system::error_code e, transport::send_reservation r) {
                   if (e) {
                     failure = e;
                     return;
                   }
                   commit_bytes(std::move(r), make_message(accepted + kWaiting, kSize));
                   granted_there = true;
                 }));
  // While reservations wait, try_reserve does not overtake them, however small.
  boost::system::error_code ec;
  CHECK_FALSE(pair.client->try_reserve(1, ec));
  CHECK(ec == boost::asio::error::would_block);

  auto sh = std::make_shared<recording_handler>();
  pair.server->start(sh);  // the peer consumes now: room comes back
  REQUIRE(run_until(io, [&] { return granted == kWaiting || failure.has_value(); }));
  REQUIRE(run_until(io, [&] {
    granted_elsewhere.poll();
    return granted_there || failure.has_value();
  }));
  CHECK_FALSE(failure);
  const std::uint64_t total = accepted + kWaiting + 1;
  REQUIRE(run_until(io, [&] { return sh->messages.size() == total; }));
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < total; ++i) bad += is_message(sh->messages[i], i, kSize) ? 0 : 1;
  CHECK(bad == 0);  // nothing of the cancelled wait was sent
  pair.client->close();
  REQUIRE(run_until(io, [&] { return ch->close_calls == 1 && sh->close_calls == 1; }));

  // On an ended connection: not_connected, from both calls, never inline.
  CHECK_FALSE(pair.client->try_reserve(1, ec));
  CHECK(ec == transport::errc::not_connected);
  std::optional<boost::system::error_code> after_close;
  pair.client->async_reserve(
      1, [&](boost::system::error_code e, transport::send_reservation) { after_close = e; });
  CHECK_FALSE(after_close);
  REQUIRE(run_until(io, [&] { return after_close.has_value(); }));
  CHECK(*after_close == transport::errc::not_connected);
}

// A waiting reservation when the connection is closed completes with closed_locally, on every
// transport; reservations dropped or committed short give their room back and send only what
// was committed.
inline void contract_reservations(const pair_factory& make) {
  {
    stalled_client f(make);
    std::optional<boost::system::error_code> waited;
    f.pair.client->async_reserve(
        stalled_client::kSize, [&](boost::system::error_code e, transport::send_reservation) { waited = e; });
    run_ready(f.io);
    CHECK_FALSE(waited);
    f.pair.client->close();
    REQUIRE(run_until(f.io, [&] { return waited.has_value(); }));
    CHECK(*waited == transport::errc::closed_locally);
    auto sh = std::make_shared<recording_handler>();
    f.pair.server->start(sh);
    REQUIRE(run_until(f.io, [&] { return f.ch->close_calls == 1 && sh->close_calls == 1; }));
  }
  boost::asio::io_context io;
  auto pair = make(io, {});
  auto sh = std::make_shared<recording_handler>();
  pair.client->start(std::make_shared<recording_handler>());
  pair.server->start(sh);
  boost::system::error_code ec;
  for (int i = 0; i < 1000; ++i) {  // far more than any send room: dropped ones must come back
    auto dropped = pair.client->try_reserve(64 * 1024, ec);
    REQUIRE_FALSE(ec);
    REQUIRE(dropped.size() == 64 * 1024);
  }
  auto r = pair.client->try_reserve(5000, ec);
  REQUIRE_FALSE(ec);
  const auto message = make_message(7, 1234);
  std::memcpy(r.data().data(), message.data(), message.size());
  r.commit(message.size());
  CHECK_FALSE(r);
  REQUIRE(run_until(io, [&] { return sh->messages.size() == 1; }));
  CHECK(sh->messages[0] == message);
  pair.client->close();
  REQUIRE(run_until(io, [&] { return sh->close_calls == 1; }));
  CHECK(sh->messages.size() == 1);
}

// close() before start(): the handler given to start() later still gets on_close, once.
inline void contract_close_before_start(const pair_factory& make) {
  boost::asio::io_context io;
  auto pair = make(io, {});
  pair.client->close();
  auto ch = std::make_shared<recording_handler>();
  pair.client->start(ch);
  CHECK(ch->close_calls == 0);  // never inline
  REQUIRE(run_until(io, [&] { return ch->close_calls == 1; }));
  CHECK(ch->close_reason == transport::errc::closed_locally);
  // Its peer hears an abrupt end, the same on every transport: nothing was ever said on it (a
  // server refusing a connection at its limits closes it so; the client backs off).
  auto sh = std::make_shared<recording_handler>();
  pair.server->start(sh);
  REQUIRE(run_until(io, [&] { return sh->close_calls == 1; }));
  CHECK(sh->close_reason == transport::errc::connection_lost);
  run_ready(io);
  CHECK(ch->close_calls == 1);
}

// `closer_is_client`: which side calls close(); the other must see closed_by_peer after every
// message the closer had queued.
inline void contract_graceful_close(const pair_factory& make, bool closer_is_client) {
  boost::asio::io_context io;
  auto pair = make(io, {});
  auto& closer = closer_is_client ? pair.client : pair.server;
  auto& other = closer_is_client ? pair.server : pair.client;
  auto closer_h = std::make_shared<recording_handler>();
  auto other_h = std::make_shared<recording_handler>();
  closer->start(closer_h);
  other->start(other_h);
  constexpr std::uint64_t kQueued = 50;
  for (std::uint64_t i = 0; i < kQueued; ++i) REQUIRE_FALSE(send_bytes(*closer, make_message(i, 20000)));
  closer->close();  // right behind the sends: they must be flushed first
  CHECK_FALSE(closer->is_open());
  CHECK(send_bytes(*closer, make_message(0, 1)) == transport::errc::not_connected);
  std::optional<boost::system::error_code> wait_result;
  closer->async_reserve(1,
                        [&](boost::system::error_code e, transport::send_reservation) { wait_result = e; });
  REQUIRE(
      run_until(io, [&] { return closer_h->close_calls == 1 && other_h->close_calls == 1 && wait_result; }));
  CHECK(closer_h->close_reason == transport::errc::closed_locally);
  CHECK(other_h->close_reason == transport::errc::closed_by_peer);
  CHECK(*wait_result == transport::errc::not_connected);  // a closing connection has no room
  REQUIRE(other_h->messages.size() == kQueued);
  for (std::uint64_t i = 0; i < kQueued; ++i) CHECK(is_message(other_h->messages[i], i, 20000));
  CHECK_FALSE(other->is_open());
  CHECK(send_bytes(*other, make_message(0, 1)) == transport::errc::not_connected);
  closer->close();  // idempotent
  other->close();
  run_ready(io);
  CHECK(closer_h->close_calls == 1);
  CHECK(other_h->close_calls == 1);
  CHECK(closer_h->messages_after_close + other_h->messages_after_close == 0);
}

// Coalesced commits (send_reservation::commit_coalesced, what a stream writing ahead uses): a lone
// one goes out with nothing committed behind it; a writer committing again from each completion
// gets every message delivered in order, mixed with plain commits; held ones go before a close.
inline void contract_coalesced_commits(const pair_factory& make) {
  boost::asio::io_context io;
  auto pair = make(io, {});
  auto ch = std::make_shared<recording_handler>();
  auto sh = std::make_shared<recording_handler>();
  pair.client->start(ch);
  pair.server->start(sh);
  constexpr std::size_t kSize = 100;
  const auto fill = [&](transport::send_reservation& r, std::uint64_t i, bool coalesce) {
    const auto bytes = make_message(i, kSize);
    std::memcpy(r.data().data(), bytes.data(), bytes.size());
    if (coalesce) {
      r.commit_coalesced(bytes.size());
    } else {
      r.commit(bytes.size());
    }
  };
  boost::system::error_code ec;
  auto lone = pair.client->try_reserve(kSize, ec);
  REQUIRE_FALSE(ec);
  fill(lone, 0, true);
  REQUIRE(run_until(io, [&] { return sh->messages.size() == 1; }));

  constexpr std::uint64_t kCount = 300;
  std::uint64_t next = 1;
  boost::system::error_code failed;
  std::function<void()> write_one = [&] {
    if (next >= kCount) return;
    pair.client->async_reserve(kSize, [&](boost::system::error_code e, transport::send_reservation r) {
      if (e) {
        failed = e;
        return;
      }
      fill(r, next, next % 7 != 0);
      ++next;
      write_one();
    });
  };
  write_one();
  REQUIRE(run_until(io, [&] { return sh->messages.size() == kCount || failed; }));
  REQUIRE_FALSE(failed);
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < kCount; ++i) {
    if (!is_message(sh->messages[i], i, kSize)) ++bad;
  }
  CHECK(bad == 0);

  for (std::uint64_t i = kCount; i < kCount + 5; ++i) {
    auto r = pair.client->try_reserve(kSize, ec);
    REQUIRE_FALSE(ec);
    fill(r, i, true);
  }
  pair.client->close();  // right behind held messages: they go first
  REQUIRE(run_until(io, [&] { return sh->close_calls == 1 && ch->close_calls == 1; }));
  CHECK(sh->close_reason == transport::errc::closed_by_peer);
  REQUIRE(sh->messages.size() == kCount + 5);
  for (std::uint64_t i = kCount; i < kCount + 5; ++i) CHECK(is_message(sh->messages[i], i, kSize));
}

inline void contract_never_inline(const pair_factory& make) {
  boost::asio::io_context io;
  auto pair = make(io, {});
  call_guard guard;
  auto ch = std::make_shared<recording_handler>(&guard);
  auto sh = std::make_shared<recording_handler>(&guard);
  pair.client->start(ch);
  pair.server->start(sh);
  // Echo from inside on_message: calling send() from a handler is allowed and must not recurse.
  sh->on_message_hook = [&](std::size_t n) {
    guard.active = true;
    const auto ec = send_bytes(*pair.server, sh->messages[n - 1]);
    guard.active = false;
    CHECK_FALSE(ec);
  };
  for (int round = 0; round < 100; ++round) {
    guard.active = true;
    const auto ec = send_bytes(*pair.client, make_message(round, 100));
    std::optional<boost::system::error_code> writable;
    pair.client->async_reserve(10, [&](boost::system::error_code e, transport::send_reservation r) {
      writable = e;
      CHECK(r.size() == 10);  // dropped: room given back
    });
    const bool completed_inline = writable.has_value();
    guard.active = false;
    REQUIRE_FALSE(ec);
    CHECK_FALSE(completed_inline);
    REQUIRE(run_until(io, [&] { return writable.has_value(); }));
    CHECK_FALSE(*writable);
  }
  REQUIRE(run_until(io, [&] { return ch->messages.size() == 100; }));
  guard.active = true;
  pair.client->close();
  const bool closed_inline = ch->close_calls > 0;
  guard.active = false;
  CHECK_FALSE(closed_inline);
  REQUIRE(run_until(io, [&] { return ch->close_calls == 1 && sh->close_calls == 1; }));
  CHECK(ch->inline_calls == 0);
  CHECK(sh->inline_calls == 0);
}

inline void contract_close_from_handler_and_both_sides(const pair_factory& make) {
  boost::asio::io_context io;
  auto pair = make(io, {});
  auto ch = std::make_shared<recording_handler>();
  auto sh = std::make_shared<recording_handler>();
  // The server closes from inside its 3rd on_message: no delivery after that.
  sh->on_message_hook = [&](std::size_t n) {
    if (n == 3) pair.server->close();
  };
  pair.client->start(ch);
  pair.server->start(sh);
  for (int i = 0; i < 20; ++i) REQUIRE_FALSE(send_bytes(*pair.client, make_message(i, 10)));
  REQUIRE(run_until(io, [&] { return sh->close_calls == 1 && ch->close_calls == 1; }));
  CHECK(sh->messages.size() == 3);
  CHECK(sh->close_reason == transport::errc::closed_locally);
  CHECK(ch->close_reason == transport::errc::closed_by_peer);

  // Both sides close in the same turn: each sees closed_locally, exactly once.
  boost::asio::io_context io2;
  auto pair2 = make(io2, {});
  auto a = std::make_shared<recording_handler>();
  auto b = std::make_shared<recording_handler>();
  pair2.client->start(a);
  pair2.server->start(b);
  REQUIRE_FALSE(send_bytes(*pair2.client, make_message(0, 10)));
  pair2.client->close();
  pair2.server->close();
  pair2.client->close();
  REQUIRE(run_until(io2, [&] { return a->close_calls == 1 && b->close_calls == 1; }));
  run_ready(io2);
  CHECK(a->close_calls == 1);
  CHECK(b->close_calls == 1);
  CHECK(a->close_reason == transport::errc::closed_locally);
  CHECK(b->close_reason == transport::errc::closed_locally);
}

}  // namespace rdmarpc::test

// Instantiates every contract test for one transport. NAME is a string literal used as the test
// name prefix, TAG a Catch tag string such as "[tcp]", FACTORY an expression of type pair_factory.
#define RDMARPC_CONNECTION_CONTRACT_TESTS(NAME, TAG, FACTORY)                                                \
  TEST_CASE(NAME " contract: start, and not_connected before it", "[contract]" TAG) {                        \
    rdmarpc::test::contract_start_and_not_connected(FACTORY);                                                \
  }                                                                                                          \
  TEST_CASE(NAME " contract: many messages both ways arrive in order, counters add up", "[contract]" TAG) {  \
    rdmarpc::test::contract_ordered_delivery(FACTORY);                                                       \
  }                                                                                                          \
  TEST_CASE(NAME " contract: sizes 0, 1, 8K, 8K+1, 1M, max - gathered parts", "[contract]" TAG) {            \
    rdmarpc::test::contract_message_sizes(FACTORY);                                                          \
  }                                                                                                          \
  TEST_CASE(NAME " contract: held messages stay intact while more arrive", "[contract]" TAG) {               \
    rdmarpc::test::contract_held_messages(FACTORY);                                                          \
  }                                                                                                          \
  TEST_CASE(NAME " contract: larger than max is message_too_large and sends nothing", "[contract]" TAG) {    \
    rdmarpc::test::contract_too_large(FACTORY);                                                              \
  }                                                                                                          \
  TEST_CASE(NAME " contract: would_block - cancellable async_reserve served in order", "[contract]" TAG) {   \
    rdmarpc::test::contract_back_pressure(FACTORY);                                                          \
  }                                                                                                          \
  TEST_CASE(NAME " contract: reservations - waiting at close - dropped - committed short",                   \
            "[contract]" TAG) {                                                                              \
    rdmarpc::test::contract_reservations(FACTORY);                                                           \
  }                                                                                                          \
  TEST_CASE(NAME " contract: close before start still reports on_close - the peer hears connection_lost",    \
            "[contract]" TAG) {                                                                              \
    rdmarpc::test::contract_close_before_start(FACTORY);                                                     \
  }                                                                                                          \
  TEST_CASE(NAME " contract: graceful close by the client flushes first", "[contract]" TAG) {                \
    rdmarpc::test::contract_graceful_close(FACTORY, true);                                                   \
  }                                                                                                          \
  TEST_CASE(NAME " contract: graceful close by the server flushes first", "[contract]" TAG) {                \
    rdmarpc::test::contract_graceful_close(FACTORY, false);                                                  \
  }                                                                                                          \
  TEST_CASE(NAME " contract: coalesced commits - alone - from each completion - before close",               \
            "[contract]" TAG) {                                                                              \
    rdmarpc::test::contract_coalesced_commits(FACTORY);                                                      \
  }                                                                                                          \
  TEST_CASE(NAME " contract: handlers never run inline from commit/close/async_reserve", "[contract]" TAG) { \
    rdmarpc::test::contract_never_inline(FACTORY);                                                           \
  }                                                                                                          \
  TEST_CASE(NAME " contract: close from a handler - simultaneous close - on_close exactly once",             \
            "[contract]" TAG) {                                                                              \
    rdmarpc::test::contract_close_from_handler_and_both_sides(FACTORY);                                      \
  }
