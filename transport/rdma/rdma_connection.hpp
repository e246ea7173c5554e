#pragma once
// rdma_connection: transport::connection over one RC queue pair set up by rdma_cm. It joins the
// pieces: cq_reactor (polling modes) and cm_event_pump drive it, connection_lifecycle says what a
// close or an end means, credit_window gates sends (credits in the immediate data), send_ring
// lends registered send memory, receive_ring tracks the pre-posted slots read in place; what is
// left here is posting (fragments, selective signaling, inline data) and handling completions.
// Layer: transport (rdma). Threading: one executor per connection; every member, the completion
// channel and rdma_cm event handling run on it; no locks on the data path.

#include <array>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/connection.hpp"
#include "transport/rdma/cm_event_pump.hpp"
#include "transport/rdma/connection_lifecycle.hpp"
#include "transport/rdma/cq_reactor.hpp"
#include "transport/rdma/credit_window.hpp"
#include "transport/rdma/device_event_monitor.hpp"
#include "transport/rdma/message_ordering.hpp"
#include "transport/rdma/qp_resources.hpp"
#include "transport/rdma/receive_ring.hpp"
#include "transport/rdma/send_ring.hpp"
#include "transport/rdma/wire.hpp"
#include "transport/ring_queue.hpp"

namespace rdmarpc::transport::rdma {

// Sending: a reservation is contiguous space in the registered send ring (send_buffers *
// slot_size bytes), so the caller serializes straight into memory the NIC reads; its fragments
// are posted from there when credits and send-queue room allow, and the space comes back when
// the send completes. A message larger than a quarter of the ring gets a buffer of its own,
// registered for it and deregistered once sent (bounded by send_queue_bytes).
// close() flushes committed messages for at most options.connect_timeout (a peer that never
// returns credits cannot keep us open). Device async events (a QP error, the port going down) reach
// it through options.device_events, when set (device_event_monitor.hpp); error completions (a
// failed QP flushes its posted receives and sends), rdma_cm events (cm_event_policy.hpp) and the
// heartbeat (rpc layer) report the rest.
class rdma_connection final : public connection,
                              public received_message::owner,
                              public cq_reactor::handler,
                              public cm_event_pump::handler {
 public:
  // `resources` is connected (rdma_cm ESTABLISHED seen, the id on its own event channel) and its
  // whole ring is posted; `peer` is the handshake the peer sent. Nothing runs until start().
  rdma_connection(boost::asio::any_io_executor ex, std::unique_ptr<qp_resources> resources,
                  const connection_options& options, const wire::handshake& peer);
  ~rdma_connection() override;

  executor_type get_executor() const noexcept override { return ex_; }
  void start(std::shared_ptr<connection_handler> handler) override;
  void close() override;
  bool is_open() const noexcept override { return life_.is_open(); }
  const connection_stats& stats() const noexcept override { return stats_; }
  std::string remote_address() const override { return remote_address_; }

  // TEST ONLY, on purpose not reachable through connection.hpp, connect.hpp or any option: send
  // without waiting for the peer's credits (and stop checking its announcements, which no longer
  // add up), to prove an overrun shows up as an RNR error. Call before sending.
  void send_without_credits_for_testing() noexcept { send_without_credits_ = true; }

  void release_message(std::uint64_t token) noexcept override;
  std::shared_ptr<received_message::owner> keep_alive() noexcept override {
    return std::shared_ptr<received_message::owner>(shared_from_this(), this);
  }

 protected:
  send_reservation reserve_now(std::size_t bytes, boost::system::error_code& ec) override;
  void commit_reservation(std::uint64_t token, std::size_t size, bool coalesce) noexcept override;
  void ring_doorbell() noexcept override { post_committed(); }
  void cancel_reservation(std::uint64_t token) noexcept override;

 private:
  // A committed message whose fragments are not all posted yet (waiting for credits or SQ room).
  struct committed_message {
    std::uint64_t id;  // its send_ring entry
    const std::byte* data;
    std::uint32_t lkey;
    std::size_t size;
    std::size_t fragments;
    bool large;            // in its own large_buffer (decided at reservation, not by the size committed)
    std::size_t next = 0;  // next fragment to post
  };
  // A message fully posted: its space is freed once WR `last_seq` completed.
  struct posted_message {
    std::uint64_t last_seq;
    std::uint64_t id;
  };
  // The own registered buffer of a message too large for the ring.
  struct large_buffer {
    // Never assigned over (that would unmap `memory` before deregistering `mr`): only built and moved.
    verbs::mapped_pages memory;
    verbs::memory_region mr;  // declared after memory: deregistered before it is freed
    std::size_t bytes;
  };

  std::shared_ptr<rdma_connection> self() {
    return std::static_pointer_cast<rdma_connection>(shared_from_this());
  }

  // Completions (cq_reactor::handler) and rdma_cm events (cm_event_pump::handler).
  std::size_t poll_completions() override;  // returns the number of completions handled
  // The completion path, inlined into poll_completions' loop (a call less per layer and message).
  [[gnu::always_inline]] inline void handle_completion(const ibv_wc& wc);
  [[gnu::always_inline]] inline void handle_receive(const ibv_wc& wc);
  [[gnu::always_inline]] inline void after_completions();  // once per batch (poll_completions only)
  void on_cm_event(verbs::cm_event event) override;
  bool on_cm_error(const boost::system::error_code& ec) override;
  void watch_device_events();  // subscribes to options_.device_events, if any

  // Send path.
  bool sq_has_room() const noexcept { return posted_seq_ - completed_seq_ < resources_->send_buffers(); }
  bool acquire_data_credit(std::uint32_t& announce) noexcept {
    if (credits_.can_send_data()) {
      announce = credits_.take_for_data();
      return true;
    }
    if (send_without_credits_) {  // test only: send anyway, to prove RNR shows up
      announce = 0;
      return true;
    }
    return false;
  }
  send_reservation reserve_large(std::size_t bytes, boost::system::error_code& ec);
  void drop_entry(std::uint64_t id) noexcept;  // frees a ring entry (and its large buffer)
  void post_committed();                       // posts what credits and SQ room allow
  // Prepares m's next fragment into the batch (posting the batch once full). False when it cannot
  // go now (no SQ room or no credit: the batch so far is posted) or a post failed.
  [[gnu::always_inline]] inline bool post_next_fragment(committed_message& m);
  // Sends are prepared into a batch and posted as one chained ibv_post_send: one doorbell (for rxe,
  // one syscall) for all the fragments of a message instead of one each.
  [[gnu::always_inline]] inline void prepare_send(const std::byte* data, std::uint32_t lkey,
                                                  std::uint32_t length, std::uint32_t imm, bool credit_only,
                                                  bool must_signal);
  // Posts the batch. Inline (as is send_ring::allocate): once per message sent, and every call on
  // that path shows under emulation (TCG). False when the post failed (post_failed: the end).
  [[gnu::always_inline]] inline bool flush_sends();
  bool post_failed(int rc);
  bool post_credit_only(std::uint32_t imm);  // prepare + flush
  void reclaim_sent();                       // frees the space of messages whose sends completed
  bool sent_completed() const noexcept {     // reclaim_sent has work: the oldest posted one is done
    return !posted_.empty() && posted_.front().last_seq < completed_seq_;
  }
  void pump();
  void maybe_send_credit_update();

  // Receive path.
  // The reactor's reference keeps us alive while a lent message is delivered.
  [[gnu::always_inline]] inline void deliver(std::span<const std::byte> bytes,
                                             std::uint64_t slot);  // lent from the ring
  void deliver(std::vector<std::byte> whole);                      // reassembled
  void flush_reposts();
  bool reposts_waiting() const noexcept {  // flush_reposts has work: reposts due, or to drop
    return receives_.has_pending() && (receives_.repost_due() || life_.has_ended());
  }

  // Ending.
  void fail(boost::system::error_code reason);
  void watch_reassembly();
  void try_finish_close();
  void check_drained();
  void shutdown_resources() noexcept;

  boost::asio::any_io_executor ex_;
  connection_options options_;
  bool send_without_credits_ = false;  // see send_without_credits_for_testing
  wire::handshake peer_;
  std::unique_ptr<qp_resources> resources_;
  connection_stats stats_;
  // Both watch fds owned by resources_ (released, never closed, before it tears down).
  cq_reactor reactor_;
  cm_event_pump cm_pump_;
  device_event_monitor::subscription device_events_;  // reset before the QP is destroyed
  boost::asio::steady_timer drain_timer_;
  boost::asio::steady_timer reassembly_timer_;  // watch_reassembly()
  std::uint64_t fragmented_messages_ = 0;       // started; tells the timer's message apart

  credit_window credits_;
  wire::reassembler reassembler_;
  std::shared_ptr<connection_handler> handler_;
  connection_lifecycle life_;
  std::string remote_address_;

  // Send side: WRs are numbered by sequence (wr_id); RC completes them in order.
  std::uint32_t fragment_size_;
  send_ring ring_;
  std::size_t large_threshold_;  // larger messages get a large_buffer
  std::uint64_t posted_seq_ = 0;
  std::uint64_t completed_seq_ = 0;  // every WR below this has completed
  std::uint32_t since_signal_ = 0;
  std::size_t unsignaled_bytes_ = 0;  // ring bytes posted since the last signaled WR
  bool stalled_ = false;
  static constexpr std::size_t kPostBatch = 32;
  std::array<ibv_send_wr, kPostBatch> batch_wrs_{};
  std::array<ibv_sge, kPostBatch> batch_sges_{};
  std::size_t batch_size_ = 0;
  [[no_unique_address]] message_ordering::link ordering_;  // for ThreadSanitizer only
  ring_queue<committed_message> committed_;
  ring_queue<posted_message> posted_;
  std::unordered_map<std::uint64_t, large_buffer> large_;  // by ring entry id
  std::size_t large_bytes_ = 0;

  // Receive side.
  receive_ring receives_;
  bool repost_scheduled_ = false;  // a post will repost what was released outside the poll
  bool in_poll_ = false;
  bool post_first_commit_ = false;  // the next commit in the poll posts at once (poll_completions)
};

}  // namespace rdmarpc::transport::rdma
