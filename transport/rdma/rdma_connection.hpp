#pragma once
// rdma_connection: transport::connection over one RC queue pair set up by rdma_cm. Receive ring
// read in place, credit flow control (credit_window, credits in the immediate data), fragmentation
// of messages larger than a slot, selectively signaled sends from a registered buffer pool.
// Layer: transport (rdma). Threading: one executor per connection; every member, the completion
// channel and rdma_cm event handling run on it; no locks on the data path.

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transport/connection.hpp"
#include "transport/rdma/credit_window.hpp"
#include "transport/rdma/qp_resources.hpp"
#include "transport/rdma/wire.hpp"
#include "transport/writable_waiters.hpp"

namespace rdmarpc::transport::rdma {

// close() flushes queued messages for at most options.connect_timeout (a peer that never returns
// credits cannot keep us open). QP async events (ibv_get_async_event) are not watched: they are
// per device context, shared by every connection of the process; error completions and rdma_cm
// events report the same failures.
class rdma_connection final : public connection, public received_message::owner {
 public:
  // `resources` is connected (rdma_cm ESTABLISHED seen, the id on its own event channel) and its
  // whole ring is posted; `peer` is the handshake the peer sent. Nothing runs until start().
  rdma_connection(boost::asio::any_io_executor ex, std::unique_ptr<qp_resources> resources,
                  const connection_options& options, const wire::handshake& peer);
  ~rdma_connection() override;

  executor_type get_executor() const noexcept override { return ex_; }
  void start(std::shared_ptr<connection_handler> handler) override;
  using connection::send;
  boost::system::error_code send(std::span<const boost::asio::const_buffer> parts) override;
  void close() override;
  bool is_open() const noexcept override { return state_ == state::open; }
  std::size_t max_message_size() const noexcept override { return max_send_message_; }
  const connection_stats& stats() const noexcept override { return stats_; }
  std::string remote_address() const override { return remote_address_; }

  void release_message(std::uint64_t token) noexcept override;

 protected:
  void async_wait_writable_impl(boost::asio::any_completion_handler<wait_signature> handler) override;

 private:
  enum class state { idle, open, closing, ended };
  struct outgoing {
    std::vector<std::byte> data;
    std::size_t fragments = 1;
    std::size_t next = 0;  // next fragment to post
  };
  class gather;

  std::shared_ptr<rdma_connection> self() {
    return std::static_pointer_cast<rdma_connection>(shared_from_this());
  }

  // Reactor.
  void wait_cq();
  void wait_cm();
  void on_cq_readable();
  void busy_poll_step();
  std::size_t poll_cq();  // returns the number of completions handled
  void handle_completion(const ibv_wc& wc);
  void handle_receive(const ibv_wc& wc);
  void on_cm_readable();
  void after_completions();

  // Send path.
  bool sq_has_room() const noexcept { return posted_seq_ - completed_seq_ < resources_->send_buffers(); }
  bool acquire_data_credit(std::uint32_t& announce) noexcept;
  std::size_t post_fragments(const gather& source, std::size_t total, std::size_t count, std::size_t next);
  // Sends are prepared into a batch and posted as one chained ibv_post_send: one doorbell (for rxe,
  // one syscall) for all the fragments of a message instead of one each.
  void prepare_send(std::uint32_t length, std::uint32_t imm, bool credit_only);
  bool flush_sends();
  bool post_send(std::uint32_t length, std::uint32_t imm, bool credit_only);  // prepare + flush
  void pump();
  void maybe_send_credit_update();
  void notify_writable();

  // Receive path.
  void deliver(received_message message);
  void repost(std::uint32_t slot);
  void flush_reposts();

  // Ending.
  void fail(boost::system::error_code reason);
  void try_finish_close();
  void check_drained();
  void shutdown_resources() noexcept;

  boost::asio::any_io_executor ex_;
  connection_options options_;
  wire::handshake peer_;
  std::unique_ptr<qp_resources> resources_;
  // These wrap fds owned by resources_: released (never closed) before resources_ tears down.
  std::optional<boost::asio::posix::stream_descriptor> cq_fd_;
  std::optional<boost::asio::posix::stream_descriptor> cm_fd_;
  boost::asio::steady_timer drain_timer_;

  credit_window credits_;
  wire::reassembler reassembler_;
  std::shared_ptr<connection_handler> handler_;
  connection_stats stats_;
  state state_ = state::idle;
  boost::system::error_code reason_;
  std::string remote_address_;

  // Send side: WR sequence numbers; send buffer i serves every sequence number = i mod pool size.
  std::uint32_t fragment_size_;
  std::size_t max_send_message_;
  std::uint64_t posted_seq_ = 0;
  std::uint64_t completed_seq_ = 0;  // every WR below this has completed
  std::uint32_t since_signal_ = 0;
  bool stalled_ = false;
  static constexpr std::size_t kPostBatch = 32;
  std::array<ibv_send_wr, kPostBatch> batch_wrs_{};
  std::array<ibv_sge, kPostBatch> batch_sges_{};
  std::size_t batch_size_ = 0;
  std::deque<outgoing> queue_;
  writable_waiters waiters_;

  // Receive side.
  std::uint32_t recv_posted_ = 0;
  std::vector<std::uint32_t> repost_;
  bool repost_scheduled_ = false;
  bool in_poll_ = false;
  bool shut_down_ = false;
  bool goodbye_posted_ = false;     // our close(): the last credit-only message is out
  bool peer_said_goodbye_ = false;  // the peer's close(): its disconnect is closed_by_peer
};

}  // namespace rdmarpc::transport::rdma
