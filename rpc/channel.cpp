#include "rpc/channel.hpp"

#include <google/protobuf/message_lite.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rpc/call_table.hpp"
#include "rpc/extras.hpp"
#include "rpc/frame.hpp"
#include "rpc/liveness.hpp"
#include "rpc/stream_core.hpp"
#include "transport/connect.hpp"

namespace rdmarpc {
namespace {

using clock = std::chrono::steady_clock;

// One call from start_unary_call until its handler is posted. Owned by channel_impl::calls_, which
// keeps finished ones for reuse, so steady traffic allocates none.
struct pending_call {
  std::uint32_t id = 0;
  method_descriptor method{};
  client_context* context = nullptr;
  unary_op_ptr op;   // the reply message and the caller's handler
  std::string body;  // extras followed by the serialized request; freed once sent
  std::uint32_t extras_length = 0;
  clock::time_point deadline = clock::time_point::max();
  // Keeps the channel's executor from running out of work (io_context::run returning) while
  // the call waits for a reply that only the peer can trigger. io_work on an io_context (a
  // counter, no allocation), else work.
  io_work_count io_work;
  boost::asio::any_io_executor work;
  std::optional<boost::asio::steady_timer> timer;
  bool sent = false;
  // Set when the call failed before reaching the channel's executor (serialization).
  status_code early_status = status_code::ok;
  std::string early_message;
};

class channel_impl;

// What the connection holds as its handler. A separate object so a connection generation can be
// attached: events from a connection that was replaced are ignored.
class connection_events final : public transport::connection_handler {
 public:
  connection_events(std::shared_ptr<channel_impl> ch, std::uint64_t generation)
      : channel_(std::move(ch)), generation_(generation) {}
  void on_message(transport::received_message message) override;
  void on_close(const boost::system::error_code& reason) override;

 private:
  std::shared_ptr<channel_impl> channel_;  // dropped after on_close (the connection drops us)
  std::uint64_t generation_;
};

class channel_impl final : public std::enable_shared_from_this<channel_impl>, public stream_core::owner {
 public:
  channel_impl(boost::asio::any_io_executor ex, std::optional<transport::endpoint> ep,
               channel_options options)
      : ex_(std::move(ex)),
        io_ex_(ex_.target<boost::asio::io_context::executor_type>()),
        endpoint_(std::move(ep)),
        options_(std::move(options)),
        live_(options_.heartbeat_interval, options_.heartbeat_timeout, clock::now()) {
    if (options_.max_in_flight == 0) options_.max_in_flight = 1;
  }

  boost::asio::any_io_executor get_executor() const noexcept { return ex_; }

  // Adopts an established connection (create(connection)). Runs before the channel is shared.
  void adopt(std::shared_ptr<transport::connection> conn) {
    boost::asio::post(ex_, [self = shared_from_this(), conn = std::move(conn)]() mutable {
      self->attach(std::move(conn));
    });
  }

  void start_unary_call(const method_descriptor& method, client_context* context,
                        const google::protobuf::MessageLite& request, unary_op_ptr op) {
    // The slot is emitted from the caller's side (any thread); hop to our executor by call id so a
    // late cancellation of a finished call finds nothing and does nothing.
    const std::uint32_t id = allocate_id();
    auto slot = op->cancellation_slot();
    if (slot.is_connected()) slot.template emplace<cancel_fn>(weak_from_this(), id);
    const bool own_thread = on_own_thread();
    auto c = own_thread ? calls_.new_record() : std::make_unique<pending_call>();
    c->op = std::move(op);
    c->id = id;
    c->method = method;
    c->context = context;
    if (context != nullptr) {
      context->mutable_server_initial_metadata().clear();
      context->mutable_server_trailing_metadata().clear();
    }
    c->deadline = deadline_of(context);
    if (io_ex_ != nullptr) {
      c->io_work = io_work_count(io_ex_);
    } else {
      c->work = boost::asio::prefer(ex_, boost::asio::execution::outstanding_work.tracked);
    }
    calls_started_.fetch_add(1, std::memory_order_relaxed);
    // Already on our executor (a completion handler issuing the next call, the common case): submit
    // now, serializing straight into the connection's send memory when there is room. submit never
    // runs a handler inline.
    if (own_thread) return submit(std::move(c), &request);
    // From another thread: the caller may reuse `request` as soon as we return, so serialize a
    // copy now (the one copy on this path).
    serialize_into_body(*c, request);
    boost::asio::post(ex_, [self = shared_from_this(), c = std::move(c)]() mutable {
      self->submit(std::move(c), nullptr);
    });
  }

  void close() {
    boost::asio::post(ex_, [self = shared_from_this()] { self->close_now("channel closed"); });
  }

  std::shared_ptr<stream_io> start_stream(const method_descriptor& method, client_context* context,
                                          const google::protobuf::MessageLite* first_request) {
    stream_core::settings s;
    s.side = stream_state::side::client;
    s.id = allocate_id();
    s.receive_window = normalised(options_.stream_window);
    s.max_metadata_entries = options_.max_metadata_entries;
    s.max_metadata_bytes = options_.max_metadata_bytes;
    auto core = std::make_shared<stream_core>(ex_, weak_from_this(), s);
    if (context != nullptr) {
      context->mutable_server_initial_metadata().clear();
      context->mutable_server_trailing_metadata().clear();
    }
    std::string first;
    bool serialized = true;
    if (first_request != nullptr)
      serialized = first_request->IsInitialized() && first_request->SerializeToString(&first);
    // Not shared yet: the frames are queued here, sent once the stream is registered and connected.
    core->open(method, context, deadline_of(context), std::move(first), first_request != nullptr);
    calls_started_.fetch_add(1, std::memory_order_relaxed);
    auto reg = [self = shared_from_this(), core, serialized] { self->register_stream(core, serialized); };
    if (on_own_thread()) {
      reg();
    } else {
      boost::asio::post(ex_, std::move(reg));
    }
    return core;
  }

  // A stream ended and flushed what it had to send (stream_core::owner).
  void stream_ended(std::uint32_t id, status_code code) override {
    streams_.erase(id);
    (code == status_code::ok ? calls_ok_ : calls_failed_).fetch_add(1, std::memory_order_relaxed);
    if (released_) maybe_close_released();
  }

  // The user dropped its last reference: finish the calls already made, then close.
  void release() {
    boost::asio::post(ex_, [self = shared_from_this()] {
      self->released_ = true;
      self->maybe_close_released();
    });
  }

  channel_stats stats() const {
    channel_stats s;
    s.calls_started = calls_started_.load(std::memory_order_relaxed);
    s.calls_ok = calls_ok_.load(std::memory_order_relaxed);
    s.calls_failed = calls_failed_.load(std::memory_order_relaxed);
    s.connects = connects_.load(std::memory_order_relaxed);
    s.pings_sent = pings_sent_.load(std::memory_order_relaxed);
    s.pongs_received = pongs_received_.load(std::memory_order_relaxed);
    s.pings_received = pings_received_.load(std::memory_order_relaxed);
    s.heartbeat_timeouts = heartbeat_timeouts_.load(std::memory_order_relaxed);
    s.too_many_pings = too_many_pings_.load(std::memory_order_relaxed);
    return s;
  }

  // Connection events (on ex_) ----------------------------------------------------------------
  void on_message(std::uint64_t generation, transport::received_message message) {
    if (generation != generation_ || !conn_) return;
    live_.on_received();  // a flag: heartbeats cost nothing per message
    frame::decode_error err{};
    const auto v = frame::decode(message.bytes(), err);
    if (err != frame::decode_error::none) {
      protocol_violation(frame::to_string(err));
      return;
    }
    switch (v.header.kind) {
      case frame::kind::response: break;
      case frame::kind::ping: return on_ping(v.header.timeout_us);
      case frame::kind::pong:
        pongs_received_.fetch_add(1, std::memory_order_relaxed);
        return live_.on_pong(v.header.timeout_us);
      case frame::kind::reset:
        if (v.header.call_id == 0) return on_connection_reset(v);
        return on_stream_frame(v, message);
      case frame::kind::stream_message:
      case frame::kind::trailers:
      case frame::kind::window_update:
      case frame::kind::stream_headers: return on_stream_frame(v, message);
      default: return protocol_violation("unexpected frame kind from server");
    }
    auto it = calls_.find(v.header.call_id);
    pending_call* c_ptr = it != calls_.end() && it->second->sent ? it->second.get() : nullptr;
    // Limits first: nothing of the response's metadata is parsed or allocated before they hold.
    const auto fields = extras::count_fields(v.extras);
    if (!fields) {
      protocol_violation("response extras do not parse");
      return;
    }
    if (v.extras.size() > options_.max_metadata_bytes || *fields > options_.max_metadata_entries + 1) {
      if (c_ptr == nullptr) return;
      message.release();
      complete_inline_ = true;
      // An error keeps its code (its long message is what went over); a reply fails.
      const std::string why = "response metadata beyond the channel's limits (" +
                              std::to_string(options_.max_metadata_entries) + " entries, " +
                              std::to_string(options_.max_metadata_bytes) + " bytes)";
      const bool ok = v.header.status == status_code::ok;
      finish(v.header.call_id, ok ? status_code::resource_exhausted : v.header.status,
             ok ? why : why + "; status message dropped");
      complete_inline_ = false;
      pump();
      return;
    }
    // The server's metadata goes to the call's context (a call without one does not want it).
    client_context* ctx = c_ptr != nullptr ? c_ptr->context : nullptr;
    std::string status_message;
    if (!extras::decode_response(v.extras, status_message,
                                 ctx != nullptr ? &ctx->mutable_server_initial_metadata() : nullptr,
                                 ctx != nullptr ? &ctx->mutable_server_trailing_metadata() : nullptr)) {
      protocol_violation("response extras do not parse");
      return;
    }
    if (c_ptr == nullptr) return;  // finished already (deadline, cancel)
    pending_call& c = *c_ptr;
    status_code code = v.header.status;
    if (code == status_code::ok) {
      if (v.payload.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
          !c.op->response().ParseFromArray(v.payload.data(), static_cast<int>(v.payload.size()))) {
        code = status_code::internal;
        status_message = "cannot parse the response of " + std::string(c.method.full_name);
      }
    }
    message.release();
    // The reply's own call may complete inline: we are in the transport's completion, not inside an
    // initiating function. Anything the handler starts is completed the usual way (posted).
    complete_inline_ = true;
    finish(v.header.call_id, code, std::move(status_message));
    complete_inline_ = false;
    pump();
  }

  void on_close(std::uint64_t generation, const boost::system::error_code& reason) {
    if (generation != generation_) return;
    conn_.reset();
    reserving_ = false;
    if (heartbeat_timer_) heartbeat_timer_->cancel();
    if (!closed_) spdlog::debug("rdmarpc channel: connection ended: {}", reason.message());
    fail_all(status_code::unavailable,
             closed_ ? std::string("channel closed") : "connection lost: " + reason.message());
    if (!endpoint_) closed_ = true;  // a channel over a given connection cannot reconnect
  }

 private:
  struct cancel_fn {
    // A constructor, not an aggregate: slot.emplace constructs with parentheses, which clang 14
    // does not accept for aggregates (P0960).
    cancel_fn(std::weak_ptr<channel_impl> c, std::uint32_t i) noexcept : channel(std::move(c)), id(i) {}
    std::weak_ptr<channel_impl> channel;
    std::uint32_t id;
    void operator()(boost::asio::cancellation_type type) const {
      if (type == boost::asio::cancellation_type::none) return;
      if (auto ch = channel.lock()) {
        boost::asio::post(
            ch->ex_, [ch, id = id] { ch->expire(id, status_code::cancelled, "cancelled by the caller"); });
      }
    }
  };

  // The call's deadline: its context's, else now + default_timeout.
  clock::time_point deadline_of(const client_context* context) const noexcept {
    const auto deadline = context != nullptr ? context->deadline() : clock::time_point::max();
    if (deadline != clock::time_point::max() || options_.default_timeout == clock::duration::max())
      return deadline;
    const auto now = clock::now();
    return options_.default_timeout >= clock::time_point::max() - now ? clock::time_point::max()
                                                                      : now + options_.default_timeout;
  }

  // On ex_: the stream joins the channel (and is connected, or waits for the connection).
  void register_stream(const std::shared_ptr<stream_core>& core, bool serialized) {
    if (core->ended()) return;  // cancelled before it got here (its end was reported)
    if (!serialized)
      return core->fail(status_code::invalid_argument, "cannot serialize request (missing required fields?)");
    if (closed_) return core->fail(status_code::unavailable, "channel closed");
    if (calls_.size() + streams_.size() >= options_.max_in_flight + options_.max_queued_calls)
      return core->fail(status_code::resource_exhausted, "too many calls waiting on the channel");
    if (calls_.contains(core->id()) || streams_.contains(core->id()))
      return core->fail(status_code::resource_exhausted, "call id space exhausted");
    streams_.emplace(core->id(), core);
    core->arm_deadline();
    if (conn_) return core->attach(conn_);
    unattached_streams_.push_back(core);
    if (connecting_) return;
    if (!endpoint_) return fail_all(status_code::unavailable, "not connected");
    start_connect();
  }

  // Routes a stream frame to its stream. A frame for an id we never used is a violation; one for a
  // stream that ended here is dropped (it crossed our end).
  void on_stream_frame(const frame::view& v, transport::received_message& message) {
    auto it = streams_.find(v.header.call_id);
    if (it == streams_.end()) {
      if (v.header.call_id >= next_id_.load(std::memory_order_relaxed))
        protocol_violation("stream frame for a stream never opened");
      return;
    }
    auto core = it->second;  // it may end (and leave streams_) inside on_frame
    core->on_frame(v, message);
  }

  // Heartbeats ---------------------------------------------------------------------------------
  // One periodic timer per connection; nothing per message but liveness's flag.
  void start_heartbeats() {
    live_ = liveness(options_.heartbeat_interval, options_.heartbeat_timeout, clock::now());
    if (!live_.enabled()) return;
    heartbeat_timer_.emplace(ex_, live_.next_tick(clock::now()));
    arm_heartbeat();
  }

  void arm_heartbeat() {
    heartbeat_timer_->async_wait(
        [weak = weak_from_this(), gen = generation_](const boost::system::error_code& ec) {
          if (ec) return;  // cancelled: the connection ended
          if (auto self = weak.lock()) self->heartbeat_tick(gen);
        });
  }

  void heartbeat_tick(std::uint64_t gen) {
    if (gen != generation_ || !conn_) return;
    const auto now = clock::now();
    switch (live_.tick(now)) {
      case liveness::action::none: break;
      case liveness::action::send_ping:
        // No room now: not sent this time. The timeout still runs, so a server that stopped
        // reading (or granting credits) is cut off like a silent one.
        if (!send_heartbeat(frame::kind::ping, live_.ping_value()))
          pings_sent_.fetch_add(1, std::memory_order_relaxed);
        break;
      case liveness::action::peer_dead: return heartbeat_timed_out();
    }
    // On the shared tick grid: no drift with timer latency, one wake-up for all connections.
    heartbeat_timer_->expires_at(live_.next_tick(now));
    arm_heartbeat();
  }

  // A ping or pong through the connection's ordinary reserve/commit; no waiting for room.
  boost::system::error_code send_heartbeat(frame::kind kind, std::uint64_t value) {
    const auto head = frame::encode_heartbeat(kind, value);
    return conn_->send_copy(boost::asio::buffer(head));
  }

  void on_ping(std::uint64_t value) {
    pings_received_.fetch_add(1, std::memory_order_relaxed);
    (void)send_heartbeat(frame::kind::pong, value);  // no room: whatever fills the queue is traffic too
  }

  void heartbeat_timed_out() {
    heartbeat_timeouts_.fetch_add(1, std::memory_order_relaxed);
    const auto reason = make_error_code(transport::errc::connection_lost);
    spdlog::warn("rdmarpc channel: no answer from {} to a heartbeat within {} ms: {}",
                 conn_->remote_address(),
                 std::chrono::duration_cast<std::chrono::milliseconds>(options_.heartbeat_timeout).count(),
                 reason.message());
    end_connection("connection lost: " + reason.message() + " (no heartbeat answer)");
  }

  // A reset for call 0 ends the connection (the server closes it next): say why to every call.
  void on_connection_reset(const frame::view& v) {
    std::string why;
    if (!extras::decode_response(v.extras, why)) return protocol_violation("reset extras do not parse");
    if (why.empty()) why = "connection reset by the server";
    if (why == "too_many_pings") too_many_pings_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("rdmarpc channel: {} closed the connection: {} ({})", conn_->remote_address(), why,
                 to_string(v.header.status));
    end_connection("connection closed by the server: " + why + " (" +
                   std::string(to_string(v.header.status)) + ")");
  }

  // Ends the current connection now and fails its calls UNAVAILABLE with `why`. The next call
  // reconnects (a channel over a given connection stays closed).
  void end_connection(const std::string& why) {
    auto conn = std::move(conn_);
    ++generation_;  // its on_close, and a wait for send room on it, are ignored from now on
    reserving_ = false;
    if (heartbeat_timer_) heartbeat_timer_->cancel();
    conn->close();
    fail_all(status_code::unavailable, why);
    if (!endpoint_) closed_ = true;
  }

  bool on_own_thread() const noexcept { return io_ex_ != nullptr && io_ex_->running_in_this_thread(); }

  std::uint32_t allocate_id() noexcept {
    std::uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    if (id == 0) id = next_id_.fetch_add(1, std::memory_order_relaxed);  // 0 is never used
    return id;
  }

  // Extras (request metadata) and the serialized request into c.body, for a call that waits.
  static void serialize_into_body(pending_call& c, const google::protobuf::MessageLite& request) {
    if (c.context != nullptr) c.body = extras::encode_request(c.context->request_metadata());
    c.extras_length = static_cast<std::uint32_t>(c.body.size());
    if (c.body.size() > std::numeric_limits<std::uint32_t>::max()) {
      c.early_status = status_code::resource_exhausted;
      c.early_message = "request metadata too large";
    } else if (!request.AppendToString(&c.body)) {
      c.early_status = status_code::invalid_argument;
      c.early_message = "cannot serialize request (missing required fields?)";
    } else if (c.body.size() - c.extras_length > std::numeric_limits<std::uint32_t>::max()) {
      c.early_status = status_code::resource_exhausted;
      c.early_message = "request too large";
    }
  }

  // `request`: the caller's message, valid during this call only (null: c.body holds it).
  void submit(std::unique_ptr<pending_call> c, const google::protobuf::MessageLite* request) {
    const std::uint32_t id = c->id;
    if (c->early_status != status_code::ok) {
      const status_code code = c->early_status;
      std::string message = std::move(c->early_message);
      return complete(std::move(c), code, std::move(message));
    }
    if (closed_) return complete(std::move(c), status_code::unavailable, "channel closed");
    if (c->deadline <= clock::now())
      return complete(std::move(c), status_code::deadline_exceeded, "deadline exceeded");
    // Bound on everything the channel holds (sent or waiting, connected or not): back-pressure.
    if (calls_.size() + streams_.size() >= options_.max_in_flight + options_.max_queued_calls)
      return complete(std::move(c), status_code::resource_exhausted, "too many calls waiting on the channel");
    if (calls_.contains(id))
      return complete(std::move(c), status_code::resource_exhausted, "call id space exhausted");
    if (request != nullptr && !request->IsInitialized()) {
      return complete(std::move(c), status_code::invalid_argument,
                      "cannot serialize request (missing required fields?)");
    }
    if (c->deadline != clock::time_point::max()) {
      c->timer.emplace(ex_, c->deadline);
      c->timer->async_wait([weak = weak_from_this(), id](const boost::system::error_code& ec) {
        if (ec) return;  // the call finished and destroyed its timer
        if (auto self = weak.lock()) self->expire(id, status_code::deadline_exceeded, "deadline exceeded");
      });
    }
    pending_call& call = *c;
    calls_.insert(id, std::move(c));
    // Nothing waits ahead of it: straight into the connection's send memory, no copy.
    if (request != nullptr && queue_.empty() && conn_ && in_flight_ < options_.max_in_flight && !reserving_) {
      if (send_direct(call, *request)) return;
    }
    if (request != nullptr) {
      serialize_into_body(call, *request);
      if (call.early_status != status_code::ok) {
        return finish(id, call.early_status, std::move(call.early_message), /*in_queue=*/false);
      }
    }
    queue_.push_back(id);
    pump();
  }

  // The request frame header for `c` (with its remaining time); false if its deadline passed.
  bool make_request_header(const pending_call& c, std::uint32_t extras_length, std::uint32_t payload_length,
                           frame::header& h) const {
    h.kind = frame::kind::request;
    h.call_id = c.id;
    h.method_id = c.method.id;
    h.extras_length = extras_length;
    h.payload_length = payload_length;
    if (c.deadline != clock::time_point::max()) {
      const auto left = c.deadline - clock::now();
      if (left <= clock::duration::zero()) return false;
      // Round up so the server never gives up before the client does.
      const auto us = std::chrono::ceil<std::chrono::microseconds>(left).count();
      if (static_cast<std::uint64_t>(us) <= frame::kMaxTimeoutUs) {
        h.flags |= frame::kFlagHasTimeout;
        h.timeout_us = static_cast<std::uint64_t>(us);
      }
    }
    return true;
  }

  // Serializes `request` into a reservation and commits it. False (nothing sent, call untouched)
  // when there is no room now or the call needs the slow path.
  bool send_direct(pending_call& c, const google::protobuf::MessageLite& request) {
    const std::size_t payload = request.ByteSizeLong();
    const bool has_metadata = c.context != nullptr && !c.context->request_metadata().empty();
    if (has_metadata || payload > std::numeric_limits<std::uint32_t>::max()) return false;
    frame::header h;
    if (!make_request_header(c, 0, static_cast<std::uint32_t>(payload), h)) return false;
    boost::system::error_code ec;
    auto r = conn_->try_reserve(frame::kHeaderSize + payload, ec);
    if (ec) return false;  // the queued path reports it (or waits for room)
    std::byte* out = r.data().data();
    frame::encode_header(h, std::span<std::byte, frame::kHeaderSize>(out, frame::kHeaderSize));
    request.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out + frame::kHeaderSize));
    r.commit();
    c.sent = true;
    ++in_flight_;
    return true;
  }

  // Sends queued calls while in-flight slots, the connection and its send room allow.
  void pump() {
    if (queue_.empty()) return;
    if (!conn_) {
      if (closed_ || connecting_) return;
      if (!endpoint_) {
        fail_all(status_code::unavailable, "not connected");
        return;
      }
      start_connect();
      return;
    }
    while (!queue_.empty() && in_flight_ < options_.max_in_flight && !reserving_ && conn_) {
      const std::uint32_t id = queue_.front();
      pending_call& c = calls_.at(id);
      boost::system::error_code ec;
      auto r = conn_->try_reserve(frame::kHeaderSize + c.body.size(), ec);
      if (ec == boost::asio::error::would_block) {
        wait_for_room(frame::kHeaderSize + c.body.size());
        return;
      }
      if (ec) {
        queue_.pop_front();
        if (ec == transport::errc::message_too_large) {
          finish(id, status_code::resource_exhausted,
                 "request larger than the connection's maximum message size", false);
        } else {
          finish(id, to_status_code(ec), "send failed: " + ec.message(), false);
        }
        continue;
      }
      send_queued(std::move(r));
    }
  }

  // Writes the queue's first call into `r` (large enough for it) and commits it.
  void send_queued(transport::send_reservation r) {
    const std::uint32_t id = queue_.front();
    queue_.pop_front();
    pending_call& c = calls_.at(id);
    frame::header h;
    if (!make_request_header(c, c.extras_length, static_cast<std::uint32_t>(c.body.size() - c.extras_length),
                             h)) {
      return finish(id, status_code::deadline_exceeded, "deadline exceeded", /*in_queue=*/false);
    }
    std::byte* out = r.data().data();
    frame::encode_header(h, std::span<std::byte, frame::kHeaderSize>(out, frame::kHeaderSize));
    std::memcpy(out + frame::kHeaderSize, c.body.data(), c.body.size());
    r.commit(frame::kHeaderSize + c.body.size());
    c.sent = true;
    std::string().swap(c.body);
    ++in_flight_;
  }

  // The connection has no room: wait for it (the connection's one back-pressure mechanism).
  void wait_for_room(std::size_t bytes) {
    reserving_ = true;
    conn_->async_reserve(bytes, [self = shared_from_this(), gen = generation_](
                                    boost::system::error_code ec, transport::send_reservation r) {
      if (gen != self->generation_) return;  // that connection is gone; r is dropped with it
      self->reserving_ = false;
      if (ec) return;  // the connection ended: on_close fails the calls
      // The queue may have changed meanwhile (a deadline, a cancellation): use the room if it fits.
      if (!self->queue_.empty() && self->in_flight_ < self->options_.max_in_flight &&
          frame::kHeaderSize + self->calls_.at(self->queue_.front()).body.size() <= r.size()) {
        self->send_queued(std::move(r));
      } else {
        r.cancel();
      }
      self->pump();
    });
  }

  void start_connect() {
    connecting_ = true;
    transport::async_connect(ex_, *endpoint_, options_.transport,
                             [self = shared_from_this()](const boost::system::error_code& ec,
                                                         std::shared_ptr<transport::connection> conn) {
                               self->connecting_ = false;
                               if (self->closed_) {
                                 if (conn) conn->close();
                                 return;
                               }
                               if (ec) {
                                 spdlog::debug("rdmarpc channel: connect to {} failed: {}",
                                               self->endpoint_->to_uri(), ec.message());
                                 self->fail_all(
                                     status_code::unavailable,
                                     "cannot connect to " + self->endpoint_->to_uri() + ": " + ec.message());
                                 return;
                               }
                               self->attach(std::move(conn));
                             });
  }

  void attach(std::shared_ptr<transport::connection> conn) {
    conn_ = std::move(conn);
    ++generation_;
    connects_.fetch_add(1, std::memory_order_relaxed);
    conn_->start(std::make_shared<connection_events>(shared_from_this(), generation_));
    start_heartbeats();
    pump();
    for (auto& core : std::exchange(unattached_streams_, {})) {
      if (conn_) core->attach(conn_);
    }
  }

  void protocol_violation(const char* why) {
    spdlog::warn("rdmarpc channel: closing connection to {}: {}", conn_->remote_address(), why);
    // Fail now rather than waiting for on_close: the connection is not trustworthy any more. A wait
    // for send room on the old connection is ignored from now on (end_connection resets
    // reserving_): left set, it would keep pump() from ever sending on the next connection.
    end_connection(std::string("connection closed: protocol error: ") + why);
  }

  // Deadline or cancellation of call `id` (no-op when it already finished).
  void expire(std::uint32_t id, status_code code, const char* why) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    if (it->second->sent && conn_) send_cancel(id);
    finish(id, code, why);
    pump();
  }

  // Tells the server to stop working on call `id`: now, or once the connection has room (behind
  // what already waits for room; at most one per call that was sent). Dropped only when the
  // connection ends, which stops the server's handler anyway.
  void send_cancel(std::uint32_t id) {
    frame::header h;
    h.kind = frame::kind::cancel;
    h.call_id = id;
    const auto head = frame::encode_header(h);
    if (conn_->send_copy(boost::asio::buffer(head)) != boost::asio::error::would_block) return;
    conn_->async_reserve(frame::kHeaderSize,
                         [self = shared_from_this(), gen = generation_, head](boost::system::error_code ec,
                                                                              transport::send_reservation r) {
                           if (ec || gen != self->generation_)
                             return;  // that connection ended: its calls are gone
                           std::memcpy(r.data().data(), head.data(), head.size());
                           r.commit(head.size());
                         });
  }

  void finish(std::uint32_t id, status_code code, std::string message, bool in_queue = true) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    auto c = calls_.extract(it);
    if (c->sent) {
      --in_flight_;
    } else if (in_queue) {
      for (auto q = queue_.begin(); q != queue_.end(); ++q) {
        if (*q == id) {
          queue_.erase(q);
          break;
        }
      }
    }
    complete(std::move(c), code, std::move(message));
  }

  void fail_all(status_code code, const std::string& message) {
    auto calls = calls_.take_all();
    queue_.clear();
    in_flight_ = 0;
    for (auto& [id, c] : calls) complete(std::move(c), code, message);
    unattached_streams_.clear();
    auto streams = std::exchange(streams_, {});
    for (auto& [id, core] : streams) core->fail(code, message);
  }

  void close_now(const char* why) {
    if (closed_ && !conn_ && calls_.empty() && streams_.empty()) return;
    closed_ = true;
    if (heartbeat_timer_) heartbeat_timer_->cancel();
    fail_all(status_code::unavailable, why);
    if (conn_) conn_->close();  // on_close follows (ignored: no calls left)
  }

  void maybe_close_released() {
    if (released_ && calls_.empty() && streams_.empty() && !closed_) close_now("channel released");
  }

  // Hands the call's status to its handler on the handler's associated executor: inline only for
  // the call whose reply on_message is processing (complete_inline_), else queued behind us.
  void complete(std::unique_ptr<pending_call> c, status_code code, std::string message) {
    if (c->context != nullptr) c->context->set_result(code, std::move(message));
    (code == status_code::ok ? calls_ok_ : calls_failed_).fetch_add(1, std::memory_order_relaxed);
    if (c->timer) c->timer->cancel();
    auto op = std::move(c->op);
    auto io_work = std::move(c->io_work);  // released after the completion is posted
    auto work = std::move(c->work);
    keep_call(std::move(c));
    const boost::system::error_code ec =
        code == status_code::ok ? boost::system::error_code{} : make_error_code(code);
    const bool inline_ok = std::exchange(complete_inline_, false);
    if (inline_ok && io_ex_ != nullptr && op->runs_on(*io_ex_)) {
      // The handler runs on our io_context, and we are on it: call it here, without wrapping it
      // for a type-erased dispatch (what dispatch would do, minus its cost).
      complete_in_place(std::move(op), ec, ex_);  // a handler's exception comes out of run()
      if (released_) maybe_close_released();
      return;
    }
    // The io_context's own executor as the default: converting it is free, converting the
    // type-erased ex_ into the handler's executor type costs an allocation per call.
    auto target = io_ex_ != nullptr ? op->executor(*io_ex_) : op->executor(ex_);
    detail::posted_completion<unary_op> completion{std::move(op), ec, std::move(target)};
    if (inline_ok) {
      // Runs here when the handler's executor runs this thread, else is queued there.
      boost::asio::dispatch(std::move(completion));
    } else {
      // defer: a continuation of the handler running now, so Asio keeps it in this thread's own
      // queue (no lock, no reactor interrupt) when that is ex_'s thread.
      boost::asio::defer(ex_, std::move(completion));
    }
    if (released_) maybe_close_released();
  }

  // Call records are reused (on ex_ only): no allocation per call in steady state.
  static constexpr std::size_t kSpareCalls = 64;

  void keep_call(std::unique_ptr<pending_call> c) {
    if (!on_own_thread()) return;
    c->op.reset();
    c->io_work.reset();
    c->work = {};
    c->timer.reset();
    c->context = nullptr;
    c->body.clear();
    c->extras_length = 0;
    c->deadline = clock::time_point::max();
    c->sent = false;
    c->early_status = status_code::ok;
    c->early_message.clear();
    calls_.keep(std::move(c));
  }

  const boost::asio::any_io_executor ex_;
  const boost::asio::io_context::executor_type* const io_ex_;  // ex_'s target when an io_context's
  const std::optional<transport::endpoint> endpoint_;          // empty: created over a given connection
  channel_options options_;

  // Owned by ex_:
  std::shared_ptr<transport::connection> conn_;
  std::uint64_t generation_ = 0;  // bumped per connection; stale events are ignored
  bool connecting_ = false;
  bool reserving_ = false;  // an async_reserve for the queue's first call is outstanding
  bool closed_ = false;
  bool released_ = false;
  bool complete_inline_ = false;                                             // see on_message and complete
  call_table<pending_call> calls_{kSpareCalls};                              // queued and sent
  std::deque<std::uint32_t> queue_;                                          // not yet sent, in order
  std::size_t in_flight_ = 0;                                                // sent, not answered
  std::unordered_map<std::uint32_t, std::shared_ptr<stream_core>> streams_;  // open streams
  std::vector<std::shared_ptr<stream_core>> unattached_streams_;             // waiting for a connection
  std::optional<boost::asio::steady_timer> heartbeat_timer_;                 // ticks while connected
  liveness live_;                                                            // of the current connection

  // Any thread:
  std::atomic<std::uint32_t> next_id_{1};
  std::atomic<std::uint64_t> calls_started_{0}, calls_ok_{0}, calls_failed_{0}, connects_{0};
  std::atomic<std::uint64_t> pings_sent_{0}, pongs_received_{0}, pings_received_{0}, heartbeat_timeouts_{0},
      too_many_pings_{0};
};

void connection_events::on_message(transport::received_message message) {
  channel_->on_message(generation_, std::move(message));
}

void connection_events::on_close(const boost::system::error_code& reason) {
  channel_->on_close(generation_, reason);
  channel_.reset();
}

// What users hold. Its destruction lets the implementation finish in-flight calls, then close.
class channel_handle final : public channel {
 public:
  explicit channel_handle(std::shared_ptr<channel_impl> impl) : impl_(std::move(impl)) {}
  ~channel_handle() override { impl_->release(); }

  executor_type get_executor() const noexcept override { return impl_->get_executor(); }
  void start_unary_call(const method_descriptor& method, client_context* context,
                        const google::protobuf::MessageLite& request, unary_op_ptr op) override {
    impl_->start_unary_call(method, context, request, std::move(op));
  }
  std::shared_ptr<stream_io> start_stream(const method_descriptor& method, client_context* context,
                                          const google::protobuf::MessageLite* first_request) override {
    return impl_->start_stream(method, context, first_request);
  }
  void close() override { impl_->close(); }
  channel_stats stats() const override { return impl_->stats(); }

 private:
  std::shared_ptr<channel_impl> impl_;
};

}  // namespace

std::shared_ptr<channel> channel::create(executor_type ex, std::string_view uri, channel_options options) {
  auto ep = transport::parse_endpoint(uri);
  if (!ep)
    throw boost::system::system_error(ep.error(), "rdmarpc::channel::create(" + std::string(uri) + ")");
  return std::make_shared<channel_handle>(
      std::make_shared<channel_impl>(std::move(ex), *ep, std::move(options)));
}

std::shared_ptr<channel> channel::create(std::shared_ptr<transport::connection> connection,
                                         channel_options options) {
  auto impl = std::make_shared<channel_impl>(connection->get_executor(), std::nullopt, std::move(options));
  impl->adopt(std::move(connection));
  return std::make_shared<channel_handle>(std::move(impl));
}

}  // namespace rdmarpc
