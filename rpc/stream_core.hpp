#pragma once
// stream_core: one end of one stream on a connection, the stream_io behind client_stream and the
// server's readers and writers. It owns the stream's state machine (stream_state), both flow
// control windows (stream_window), the messages received but not yet read (at most the receive
// window plus one message), and the frames waiting to be sent: window updates and resets go first
// (never behind a message waiting for the peer's window, so two peers waiting on each other's
// window cannot deadlock); open, headers, messages, half-close and trailers go in order, a
// message only while the peer's window allows. Sends use the connection's reserve/commit, so a
// stream waiting for room or window holds nobody else up. The channel (client) and the server's
// connection (server) route the stream's frames to it and learn its end through `owner`.
// Layer: rpc. Threading: stream_io members from any thread (they hop to the executor); the rest
// on the connection's executor only.

#include <google/protobuf/message_lite.h>

#include <array>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "rpc/client_context.hpp"
#include "rpc/completion_op.hpp"
#include "rpc/frame.hpp"
#include "rpc/method.hpp"
#include "rpc/server_context.hpp"
#include "rpc/status.hpp"
#include "rpc/stream.hpp"
#include "rpc/stream_state.hpp"
#include "rpc/stream_window.hpp"
#include "transport/connection.hpp"

namespace rdmarpc {

class stream_core final : public stream_io, public std::enable_shared_from_this<stream_core> {
 public:
  using clock = std::chrono::steady_clock;

  class owner {
   public:
    // Stream `id` ended with `code` and has nothing left to send (called once, on the executor).
    virtual void stream_ended(std::uint32_t id, status_code code) = 0;

   protected:
    ~owner() = default;
  };

  struct settings {
    stream_state::side side = stream_state::side::client;
    std::uint32_t id = 0;
    stream_window_size receive_window = kDefaultStreamWindow;  // ours, announced to the peer
    stream_window_size send_window = kInitialStreamWindow;     // the peer's, as known so far
    // Metadata a client accepts in the server's first message and trailers.
    std::size_t max_metadata_entries = 64;
    std::size_t max_metadata_bytes = 8 * 1024;
  };

  stream_core(boost::asio::any_io_executor ex, std::weak_ptr<owner> owner, const settings& s);
  ~stream_core() override;

  // --- the owner's side (on the executor) --------------------------------------------------
  // Client: queues stream_open (method, the time left to `deadline`, the context's metadata and
  // our window) and, for server streaming, the request and the half-close. `context` (may be
  // null) gets the results. Call once, before attach.
  void open(const method_descriptor& method, client_context* context, clock::time_point deadline,
            std::string first_request, bool has_first_request, const metadata& added_metadata = {});
  // Server: the handler's context (initial metadata go with the first message or the trailers)
  // and stream_headers with our window, queued first.
  void accept(const server_context* context, clock::time_point deadline);
  // Client, on the executor once the channel registered the stream: starts the deadline timer.
  void arm_deadline();
  // Frames flow from now on (client: once connected).
  void attach(std::shared_ptr<transport::connection> conn);
  // A frame for this stream. `message` may be released (its payload was consumed).
  void on_frame(const frame::view& v, transport::received_message& message);
  // Server: the handler finished; trailers with this status (and the context's metadata) end it.
  void finish_server(status_code code, const std::string& message);
  // Ends the stream here and tells the peer (reset), e.g. deadline or a violation.
  void reset(status_code code, std::string message);
  // The connection is gone: ends the stream here, nothing is sent.
  void fail(status_code code, std::string message);
  bool ended() const noexcept { return ended_; }
  // Runs f(context) with the client's context (null once the stream object was dropped: its
  // owner may have destroyed it), holding the lock release() takes: the context cannot go away
  // while f runs. For the channel's interceptors.
  template <typename F>
  void with_client_context(F&& f) {
    const std::lock_guard lock(context_mutex_);
    f(static_cast<const client_context*>(client_ctx_));
  }
  // How it ended (once ended()).
  status_code final_code() const noexcept { return final_code_; }
  const std::string& final_message() const noexcept { return final_message_; }
  std::uint32_t id() const noexcept { return id_; }

  // --- stream_io --------------------------------------------------------------------------
  void write(const google::protobuf::MessageLite& message, handler h) override;
  bool try_write(const google::protobuf::MessageLite& message) override;
  void read(google::protobuf::MessageLite& message, handler h) override;
  void writes_done(handler h) override;
  void finish(handler h) override;
  void cancel() noexcept override;
  void release() noexcept override;

  // The messages' bytes sent and received so far (interceptors' call_outcome). On the executor.
  struct byte_counts {
    std::size_t sent = 0, received = 0;
  };
  byte_counts payload_bytes() const noexcept { return payload_bytes_; }

 private:
  struct out_frame {
    std::string bytes;             // the whole frame
    std::size_t payload = 0;       // a message's size, spent from the peer's window
    bool message = false;          // waits for the peer's window
    bool completes_write = false;  // the pending write/writes_done completes once it is committed
    bool is_open = false;
  };

  bool on_own_thread() const noexcept;
  template <typename F>
  void run_here(F&& f);  // on the executor: now if we are on it, else posted

  void do_write(const google::protobuf::MessageLite* message, std::string bytes, handler h);
  void do_read(google::protobuf::MessageLite* message, handler h);
  void do_writes_done(handler h);
  void do_finish(handler h);

  std::string encode(frame::kind kind, std::string_view extras, std::string_view payload,
                     status_code code = status_code::ok, std::uint32_t method = 0, std::uint64_t timeout = 0,
                     std::uint8_t flags = 0) const;
  std::string message_extras();  // server: initial metadata with its first message
  bool try_write_direct(const google::protobuf::MessageLite& message);
  void pump();
  void wait_for_room(std::size_t bytes);
  std::deque<out_frame>* next_frame_queue() noexcept;
  void send_front(std::deque<out_frame>& q, transport::send_reservation r);
  void handle_frame(const frame::view& v, transport::received_message& message);
  void on_message(const frame::view& v, transport::received_message& message);
  bool take_server_metadata(std::span<const std::byte> extras, std::string* status_message,
                            bool initial_only);
  void deliver(google::protobuf::MessageLite& out, std::span<const std::byte> bytes);
  void consumed(std::size_t bytes);
  void end(status_code code, std::string message, bool clean);
  void on_deadline();
  void abandon_flush(status_code code);
  bool write_queued() const noexcept;
  bool stamp_timeout(out_frame& open) const;
  void maybe_done();
  status_code write_error() const noexcept;

  void store(handler& slot, handler h);
  // Completes the operation stored in `slot` (if any): in place after the frame, timer or send
  // room being handled (never inside a stream_io call), else posted to the handler's executor.
  void complete(handler& slot, boost::system::error_code ec);
  // Completes a handler never stored (a stream_io call that fails at once): always posted.
  void post_completion(handler h, boost::system::error_code ec);
  void run_ready();
  void post_ready() noexcept;  // the held completions, all posted (after a failure)
  template <typename F>
  void delivering(F&& f);  // runs f with completions held back, then run_ready
  void update_work();

  const boost::asio::any_io_executor ex_;
  const boost::asio::io_context::executor_type* const io_ex_;
  const std::weak_ptr<owner> owner_;
  const std::uint32_t id_;
  const std::size_t max_metadata_entries_, max_metadata_bytes_;
  stream_state state_;
  stream_send_window send_window_;
  stream_receive_window receive_window_;

  std::shared_ptr<transport::connection> conn_;
  std::deque<out_frame> control_;  // window updates, reset
  std::deque<out_frame> ordered_;  // open/headers, messages, half-close, trailers
  bool reserving_ = false;
  bool open_sent_ = false;              // client: the server knows the stream (a reset must be sent)
  bool initial_metadata_done_ = false;  // server: sent; client: received
  bool headers_received_ = false;
  std::deque<std::string> inbox_;  // received, not yet read

  std::mutex context_mutex_;  // guards client_ctx_ (release() may come from any thread)
  client_context* client_ctx_ = nullptr;
  clock::time_point deadline_ = clock::time_point::max();
  const server_context* server_ctx_ = nullptr;
  std::optional<boost::asio::steady_timer> deadline_timer_;

  handler read_h_, write_h_, finish_h_;  // the operations waiting (null: none)
  google::protobuf::MessageLite* read_into_ = nullptr;
  io_work_count io_work_;              // held while an operation waits (an io_context's executor)
  boost::asio::any_io_executor work_;  // the same on another executor
  // Completions made while a frame, a timer or send room is being handled (delivering_ > 0): run
  // in place once that is done, when the handler runs on this io_context (run_ready).
  int delivering_ = 0;
  std::array<std::pair<handler, boost::system::error_code>, 3> ready_;
  std::size_t ready_count_ = 0;

  byte_counts payload_bytes_;
  bool ended_ = false;
  bool clean_end_ = false;  // by trailers (client) / our trailers (server): reads see eof
  bool owner_told_ = false;
  status_code final_code_ = status_code::ok;
  std::string final_message_;
};

}  // namespace rdmarpc
