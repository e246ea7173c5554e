#pragma once
// loopback_connection: one end of an in-memory transport::connection pair (see
// loopback_transport.hpp). Layer: transport. Threading: every member runs on this end's executor;
// the two ends exchange messages, credits and close notices only by posting to each other's executor.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <limits>
#include <optional>
#include <vector>

#include "transport/connection.hpp"
#include "transport/loopback/loopback_transport.hpp"
#include "transport/message_buffers.hpp"

namespace rdmarpc::transport::loopback {

class loopback_connection final : public connection, public received_message::owner {
 public:
  loopback_connection(boost::asio::any_io_executor ex, const loopback_options& options,
                      loopback_faults faults, std::string name);
  ~loopback_connection() override;

  // Wires the two ends together; called once by make_loopback_pair before either is used.
  static void link(const std::shared_ptr<loopback_connection>& a,
                   const std::shared_ptr<loopback_connection>& b);

  executor_type get_executor() const noexcept override { return ex_; }
  void start(std::shared_ptr<connection_handler> handler) override;
  void close() override;
  bool is_open() const noexcept override { return state_ == state::open; }
  const connection_stats& stats() const noexcept override { return stats_; }
  std::string remote_address() const override { return "loopback://" + peer_name_; }

  void release_message(std::uint64_t token) noexcept override { buffers_.give_back(token); }
  std::shared_ptr<received_message::owner> keep_alive() noexcept override {
    return std::shared_ptr<received_message::owner>(shared_from_this(), this);
  }

 protected:
  send_reservation reserve_now(std::size_t bytes, boost::system::error_code& ec) override;
  // Delivery is a post either way: coalescing would only add turns.
  void commit_reservation(std::uint64_t token, std::size_t size, bool coalesce) noexcept override;
  void ring_doorbell() noexcept override {}
  void cancel_reservation(std::uint64_t token) noexcept override;

 private:
  enum class state { idle, open, closing, closed };

  // Called on this end's executor by the peer's posts, which keep this end alive. `returned`:
  // capacity the peer gives back with the message (it delivered that many of ours). Buffers pass by
  // rvalue reference, moved from once, where they are kept.
  void on_arrival(message_buffers::buffer&& message, std::size_t returned);
  void on_delivered(std::size_t returned);  // capacity back, without a message
  void on_peer_end(boost::system::error_code reason);

  void pump();  // moves queued messages to the peer while capacity allows
  bool send_one(message_buffers::buffer&& message);
  void hand_to_peer(message_buffers::buffer&& message);
  void schedule_delivery();
  void deliver();
  // Lends `message` to the handler; the caller keeps this end alive meanwhile.
  void deliver_one(message_buffers::buffer&& message);
  void after_delivery();
  // One of the peer's messages left our inbox. The capacity goes back with our next message, or on
  // its own once half the capacity is owed (so one-way traffic never stalls).
  void return_capacity();
  void take_back_capacity(std::size_t returned);
  // Runs f on this end's executor (the io_context's own executor when it is one: no type erasure).
  template <typename F>
  void post_here(F&& f);
  void notify_peer(boost::system::error_code reason);  // once: how we ended, as the peer sees it
  void maybe_finish_close();
  // Ends the connection once: ends waiting reservations, posts on_close(reason), drops the handler, and
  // tells the peer `peer_reason` (unless empty or already told).
  void finish(boost::system::error_code reason, boost::system::error_code peer_reason);
  std::shared_ptr<loopback_connection> self() {
    return std::static_pointer_cast<loopback_connection>(shared_from_this());
  }

  boost::asio::any_io_executor ex_;
  const boost::asio::io_context::executor_type* io_ex_;  // ex_'s target when an io_context's
  loopback_options options_;
  loopback_faults faults_;
  std::string name_, peer_name_;
  std::weak_ptr<loopback_connection> peer_;  // set once by link(), read-only afterwards

  state state_ = state::idle;
  boost::system::error_code end_reason_;  // set when close() is called or the connection ends
  bool close_reported_ = false;           // a handler got on_close
  bool notified_peer_ = false;            // the peer was told we ended (closed_by_peer / connection_lost)
  std::shared_ptr<connection_handler> handler_;
  message_buffers buffers_;     // reservations, and the bytes not yet handed over
  message_queue send_queue_;    // committed, not yet handed to the peer
  std::size_t in_flight_ = 0;   // handed to the peer, not yet delivered there
  std::size_t owed_ = 0;        // the peer's messages delivered, capacity not yet returned
  std::size_t return_every_;    // owed_ that is returned on its own: half the capacity
  std::uint64_t sequence_ = 0;  // messages taken off send_queue_ so far
  // The lowest message number a fault is armed for: the messages before it skip the fault checks.
  std::uint64_t first_fault_ = std::numeric_limits<std::uint64_t>::max();
  bool delaying_ = false;
  boost::asio::steady_timer delay_timer_;

  std::deque<message_buffers::buffer> inbound_;        // arrived from the peer, not yet delivered
  std::optional<boost::system::error_code> peer_end_;  // how the peer ended, once it told us
  bool delivery_scheduled_ = false;

  connection_stats stats_;
};

}  // namespace rdmarpc::transport::loopback
