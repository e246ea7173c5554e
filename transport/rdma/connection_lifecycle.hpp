#pragma once
// connection_lifecycle: the life of an rdma connection as a small explicit state machine, from
// start through an orderly close (flush, goodbye) or a failure, to the drain of flushed work
// requests and the queue pair's destruction. Pure: no verbs, no I/O; rdma_connection asks it what
// a close or an end means and tells it what happened. Layer: transport (rdma). Threading: used on
// its connection's executor only.

#include <boost/system/error_code.hpp>
#include <cstdint>

#include "transport/error.hpp"

namespace rdmarpc::transport::rdma {

class connection_lifecycle {
 public:
  enum class state : std::uint8_t {
    idle,          // made (the ring is posted), not started: nothing is delivered yet
    open,          // delivering and sending
    flushing,      // close(): committed messages still go out; nothing is delivered
    goodbye_sent,  // close(): our goodbye (the last message) is posted; waiting for it to complete
    draining,      // ended: posted work requests come back flushed before the QP is destroyed
    shut_down,     // the QP is destroyed (or being destroyed): nothing happens any more
  };

  state current() const noexcept { return state_; }
  bool is_open() const noexcept { return state_ == state::open; }
  bool is_closing() const noexcept { return state_ == state::flushing || state_ == state::goodbye_sent; }
  // Open or closing: sends still go out.
  bool is_sending() const noexcept { return is_open() || is_closing(); }
  bool has_ended() const noexcept { return state_ == state::draining || state_ == state::shut_down; }
  bool is_shut_down() const noexcept { return state_ == state::shut_down; }
  // Why it ended (set by end()).
  const boost::system::error_code& reason() const noexcept { return reason_; }

  // start(): idle -> open. False when it ended before it started (the handler still hears why).
  bool start() noexcept {
    if (state_ != state::idle) return false;
    state_ = state::open;
    return true;
  }

  enum class close_action : std::uint8_t {
    none,     // already closing or ended
    flush,    // open -> flushing: send what is committed, then the goodbye
    end_now,  // never started: end it (closed_locally) at once
  };
  close_action close() noexcept {
    if (state_ == state::idle) return close_action::end_now;
    if (state_ != state::open) return close_action::none;
    state_ = state::flushing;
    return close_action::flush;
  }

  // Our goodbye is posted: flushing -> goodbye_sent.
  void goodbye_posted() noexcept {
    if (state_ == state::flushing) state_ = state::goodbye_sent;
  }

  // The peer's goodbye arrived: its disconnect will be an orderly close, not a death.
  void peer_said_goodbye() noexcept { peer_said_goodbye_ = true; }

  // How an rdma_cm DISCONNECTED ends the connection: both sides closing at once counts as our
  // close; a peer that said goodbye closed on purpose; one that did not died or gave up.
  errc disconnect_reason() const noexcept {
    if (is_closing()) return errc::closed_locally;
    return peer_said_goodbye_ ? errc::closed_by_peer : errc::connection_lost;
  }

  // -> draining. The caller then waits for flushed work requests, or shuts down at once.
  enum class end_action : std::uint8_t {
    ignored,        // already ended
    drain,          // it was started: posted work requests come back flushed
    shut_down_now,  // it never started: nothing to wait for
  };
  // Once close() was called, whatever ends the connection (a failed send of the flush, a dead peer,
  // the port going down) ends it as closed_locally: the contract of every transport
  // (connection_handler::on_close), as tcp and loopback report it too.
  end_action end(boost::system::error_code reason) noexcept {
    if (has_ended()) return end_action::ignored;
    reason_ = is_closing() ? make_error_code(errc::closed_locally) : reason;
    const bool started = state_ != state::idle;
    state_ = state::draining;
    return started ? end_action::drain : end_action::shut_down_now;
  }

  // -> shut_down from any state (the drain finished or timed out, or the connection is destroyed).
  // False when it already was.
  bool shut_down() noexcept {
    if (state_ == state::shut_down) return false;
    state_ = state::shut_down;
    return true;
  }

 private:
  state state_ = state::idle;
  bool peer_said_goodbye_ = false;
  boost::system::error_code reason_;
};

}  // namespace rdmarpc::transport::rdma
