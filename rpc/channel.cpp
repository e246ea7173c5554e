#include "rpc/channel.hpp"

#include <google/protobuf/message_lite.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/assert.hpp>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "log/log.hpp"
#include "rpc/call_deadlines.hpp"
#include "rpc/call_table.hpp"
#include "rpc/channel_state_watch.hpp"
#include "rpc/connection_heartbeats.hpp"
#include "rpc/extras.hpp"
#include "rpc/frame.hpp"
#include "rpc/interceptor_chain.hpp"
#include "rpc/parse_message.hpp"
#include "rpc/server_context.hpp"
#include "rpc/stream_core.hpp"
#include "transport/connect.hpp"
#include "transport/resolve.hpp"

namespace rdmarpc {
namespace {

using clock = std::chrono::steady_clock;
constexpr std::size_t kNoEndpoint = load_balancer::none;

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
  std::size_t sent_on = kNoEndpoint;  // the endpoint whose connection carried it; none: queued
  bool wait_for_ready = false;
  // Set when the call failed before reaching the channel's executor (serialization, an interceptor).
  status_code early_status = status_code::ok;
  std::string early_message;
  // Interceptors (channel_options::interceptors): how many are owed on_call_end, since when, the
  // metadata they added (sent after the context's), and the message sizes they are told.
  std::uint16_t intercepted = 0;
  clock::time_point started{};
  metadata added_metadata;
  std::size_t request_bytes = 0, response_bytes = 0;

  bool sent() const noexcept { return sent_on != kNoEndpoint; }
};

// A stream the channel routes frames to: attached to one endpoint's connection, or waiting for one.
struct open_stream {
  std::shared_ptr<stream_core> core;
  std::size_t endpoint = kNoEndpoint;
  bool wait_for_ready = false;
};

// A stream's passage through the channel's interceptors (they are owed on_call_end when asked > 0).
struct stream_interception {
  method_descriptor method{};
  const client_context* context = nullptr;
  std::uint16_t asked = 0;
  clock::time_point started{};
  std::shared_ptr<stream_core> core;  // held from registration until it ended
};

// One endpoint of the channel (gRPC's subchannel): its connection, its status (what the load
// balancer sees), its reconnect backoff and its heartbeats.
struct endpoint_slot : endpoint_status {
  endpoint_slot(boost::asio::any_io_executor ex, std::optional<transport::endpoint> ep,
                const reconnect_backoff_options& backoff_options, const channel_options& o)
      : endpoint(std::move(ep)),
        backoff(backoff_options),
        retry_timer(ex),
        heartbeats(o.heartbeat_interval, o.heartbeat_timeout) {}

  std::string name() const { return endpoint ? endpoint->to_uri() : std::string("the connection"); }

  const std::optional<transport::endpoint> endpoint;  // empty: a given connection (no reconnect)
  std::shared_ptr<transport::connection> conn;
  std::uint64_t generation = 0;  // of conn; events of an older connection are ignored
  reconnect_backoff backoff;
  boost::asio::steady_timer retry_timer;  // transient_failure until it fires
  connection_heartbeats heartbeats;       // of the current connection, ticking while connected
};

class channel_impl;

// What a connection holds as its handler. A separate object so the endpoint and the connection's
// generation can be attached: events from a connection that was replaced are ignored.
class connection_events final : public transport::connection_handler {
 public:
  connection_events(std::shared_ptr<channel_impl> ch, std::size_t endpoint, std::uint64_t generation)
      : channel_(std::move(ch)), endpoint_(endpoint), generation_(generation) {}
  void on_message(transport::received_message message) override;
  void on_close(const boost::system::error_code& reason) override;

 private:
  std::shared_ptr<channel_impl> channel_;  // dropped after on_close (the connection drops us)
  std::size_t endpoint_;
  std::uint64_t generation_;
};

class channel_impl final : public std::enable_shared_from_this<channel_impl>, public stream_core::owner {
 public:
  // A channel to `endpoints` (resolved on first use when a host is a name).
  channel_impl(boost::asio::any_io_executor ex, std::vector<transport::endpoint> endpoints,
               channel_options options)
      : channel_impl(std::move(ex), std::move(options)) {
    configured_ = std::move(endpoints);
    bool numeric = true;
    for (const auto& ep : configured_) numeric = numeric && transport::is_numeric_host(ep.host);
    if (numeric) set_endpoints(configured_);
  }

  // A channel over a given connection (create(connection)): one endpoint that never reconnects.
  channel_impl(std::shared_ptr<transport::connection> conn, channel_options options)
      : channel_impl(conn->get_executor(), std::move(options)) {
    slots_.push_back(std::make_unique<endpoint_slot>(ex_, std::nullopt, options_.reconnect, options_));
    resolved_ = true;
    slots_[0]->state = channel_state::connecting;
    publish_state();
    given_ = std::move(conn);
  }

  // Adopts the given connection. Runs once the channel is shared.
  void adopt() {
    boost::asio::post(ex_, [self = shared_from_this()] { self->attach(0, std::move(self->given_)); });
  }

  boost::asio::any_io_executor get_executor() const noexcept { return ex_; }

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
      c->wait_for_ready = context->wait_for_ready();
    }
    c->deadline = deadline_of(context);
    if (!chain_.empty()) [[unlikely]]
      intercept(*c);
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
    stream_interception icpt{method, context};
    metadata added;
    call_verdict verdict;
    if (!chain_.empty()) [[unlikely]] {
      icpt.started = clock::now();
      verdict = chain_.start(client_call_info{method, context, true}, added, icpt.asked);
    }
    // Not shared yet: the frames are queued here, sent once the stream is registered and connected.
    core->open(method, context, deadline_of(context), std::move(first), first_request != nullptr, added);
    calls_started_.fetch_add(1, std::memory_order_relaxed);
    const bool wait_for_ready = context != nullptr && context->wait_for_ready();
    auto reg = [self = shared_from_this(), core, serialized, wait_for_ready, icpt,
                verdict = std::move(verdict)]() mutable {
      self->register_stream(core, serialized, wait_for_ready, icpt, std::move(verdict));
    };
    if (on_own_thread()) {
      reg();
    } else {
      boost::asio::post(ex_, std::move(reg));
    }
    return core;
  }

  // A stream ended and flushed what it had to send (stream_core::owner).
  void stream_ended(std::uint32_t id, status_code code) override {
    if (auto it = intercepted_streams_.find(id); it != intercepted_streams_.end()) [[unlikely]] {
      auto icpt = std::move(it->second);
      intercepted_streams_.erase(it);
      end_stream_interception(icpt, *icpt.core);
    }
    streams_.erase(id);
    (code == status_code::ok ? calls_ok_ : calls_failed_).fetch_add(1, std::memory_order_relaxed);
    if (released_) maybe_close_released();
  }

  // The user dropped its last reference: finish the calls already made, then close.
  // The last handle is gone. If the executor's io_context is destroyed before this task runs, the
  // task is destroyed unrun and abandon() breaks the channel -> connection -> connection_events ->
  // channel cycle, so a program that drops its channel and then its io_context leaks nothing.
  void release() {
    class release_task {
     public:
      explicit release_task(std::shared_ptr<channel_impl> self) : self_(std::move(self)) {}
      release_task(release_task&&) noexcept = default;
      release_task& operator=(release_task&&) = delete;
      ~release_task() {
        if (self_) self_->abandon();
      }
      void operator()() {
        const auto self = std::move(self_);
        self->released_ = true;
        self->maybe_close_released();
      }

     private:
      std::shared_ptr<channel_impl> self_;
    };
    boost::asio::post(ex_, release_task(shared_from_this()));
  }

  // Only from release_task's destructor, when the io_context is being destroyed: nothing runs on it
  // any more, so the connections are dropped without closing them (their sockets close with them).
  void abandon() noexcept {
    for (auto& slot : slots_) slot->conn.reset();
    given_.reset();
  }

  channel_state state(bool try_to_connect) {
    const auto s = watch_.published();
    if (try_to_connect && s == channel_state::idle) {
      boost::asio::post(ex_, [self = shared_from_this()] { self->want_connections(); });
    }
    return s;
  }

  void wait_for_state_change(channel_state last,
                             boost::asio::any_completion_handler<channel::state_change_signature> h) {
    const std::uint64_t id = watch_.next_waiter_id();
    auto slot = boost::asio::get_associated_cancellation_slot(h);
    if (slot.is_connected()) {
      slot.assign([weak = weak_from_this(), id](boost::asio::cancellation_type type) {
        if (type == boost::asio::cancellation_type::none) return;
        if (auto self = weak.lock()) {
          boost::asio::post(self->ex_, [self, id] { self->watch_.cancel(id, self->aggregate()); });
        }
      });
    }
    channel_state_watch::waiter w{id, last, std::move(h),
                                  boost::asio::prefer(ex_, boost::asio::execution::outstanding_work.tracked)};
    boost::asio::post(ex_, [self = shared_from_this(), w = std::move(w)]() mutable {
      // A waiter is demand: an idle or failed channel keeps trying.
      if (self->watch_.add(std::move(w), self->aggregate())) self->want_connections();
    });
  }

  channel_stats stats() const {
    channel_stats s;
    s.calls_started = calls_started_.load(std::memory_order_relaxed);
    s.calls_ok = calls_ok_.load(std::memory_order_relaxed);
    s.calls_failed = calls_failed_.load(std::memory_order_relaxed);
    s.connects = connects_.load(std::memory_order_relaxed);
    s.connect_failures = connect_failures_.load(std::memory_order_relaxed);
    s.disconnects = disconnects_.load(std::memory_order_relaxed);
    s.going_aways = going_aways_.load(std::memory_order_relaxed);
    s.pings_sent = pings_sent_.load(std::memory_order_relaxed);
    s.pongs_received = pongs_received_.load(std::memory_order_relaxed);
    s.pings_received = pings_received_.load(std::memory_order_relaxed);
    s.heartbeat_timeouts = heartbeat_timeouts_.load(std::memory_order_relaxed);
    s.too_many_pings = too_many_pings_.load(std::memory_order_relaxed);
    return s;
  }

  // Connection events (on ex_) ----------------------------------------------------------------
  [[gnu::always_inline]] void on_message(std::size_t e, std::uint64_t generation,
                                         transport::received_message& message) {
    endpoint_slot& slot = *slots_[e];
    if (generation != slot.generation || !slot.conn) return;
    frame::decode_error err{};
    const auto v = frame::decode(message.bytes(), err);
    if (err != frame::decode_error::none) {
      protocol_violation(e, frame::to_string(err));
      return;
    }
    slot.heartbeats.on_frame(v.header.kind);  // flags: heartbeats cost nothing per message
    switch (v.header.kind) {
      case frame::kind::response: break;
      case frame::kind::ping:
        slot.heartbeats.share_with(v);
        on_ping(e, v.header.timeout_us);
        return heard_heartbeat(e);
      case frame::kind::pong:
        pongs_received_.fetch_add(1, std::memory_order_relaxed);
        slot.heartbeats.share_with(v);
        slot.heartbeats.on_pong(v);
        return heard_heartbeat(e);
      case frame::kind::reset:
        if (v.header.call_id == 0) return on_connection_reset(e, v);
        return on_stream_frame(e, v, message);
      case frame::kind::going_away: return on_going_away(e);
      case frame::kind::stream_message:
      case frame::kind::trailers:
      case frame::kind::window_update:
      case frame::kind::stream_headers: return on_stream_frame(e, v, message);
      default: return protocol_violation(e, "unexpected frame kind from server");
    }
    auto it = calls_.find(v.header.call_id);
    pending_call* c_ptr = it != calls_.end() && it->second->sent_on == e ? it->second.get() : nullptr;
    std::string status_message;
    // Most responses carry no extras (an OK status, no metadata): nothing to check or decode.
    if (!v.extras.empty() && !take_response_extras(e, v, c_ptr, message, status_message)) return;
    if (c_ptr == nullptr) return;  // finished already (deadline, cancel)
    pending_call& c = *c_ptr;
    status_code code = v.header.status;
    if (code == status_code::ok) {
      spare_reply_message* spare = nullptr;
      if (v.payload.size() <= kLentReplyMaxBytes && io_ex_ != nullptr) {
        if (const auto* type = c.op->lendable_reply_type(*io_ex_))
          spare = spare_reply(*type);  // complete() lends it: the call completes in place
      }
      google::protobuf::MessageLite& into = spare != nullptr ? *spare->message : c.op->response();
      if (!detail::parse_message(into, v.payload, c.method.reply_may_lack_required)) {
        code = status_code::internal;
        status_message = "cannot parse the response of " + std::string(c.method.full_name);
      } else {
        lent_reply_ = spare;
      }
    }
    c.response_bytes = v.payload.size();
    message.release();
    // The reply's own call may complete inline: we are in the transport's completion, not inside an
    // initiating function. Anything the handler starts is completed the usual way (posted).
    complete_inline_ = true;
    if (v.extras.empty()) {
      BOOST_ASSERT(it->second.get() == c_ptr);         // (a transport's release() does not re-enter)
      finish_at(it, code, std::move(status_message));  // nothing changed the table since the find
    } else {
      finish(v.header.call_id, code, std::move(status_message));
    }
    complete_inline_ = false;
    lent_reply_ = nullptr;  // (taken by that call's complete())
    pump();
  }

  // A response's extras: limits first (nothing of its metadata is parsed or allocated before they
  // hold), then its status message and the server's metadata (into the call's context; a call
  // without one does not want it). False when the response was handled here (a violation, or a
  // call failed for metadata beyond the limits).
  bool take_response_extras(std::size_t e, const frame::view& v, pending_call* c_ptr,
                            transport::received_message& message, std::string& status_message) {
    const auto fields = extras::count_fields(v.extras);
    if (!fields) {
      protocol_violation(e, "response extras do not parse");
      return false;
    }
    if (v.extras.size() > options_.max_metadata_bytes || *fields > options_.max_metadata_entries + 1) {
      if (c_ptr == nullptr) return false;
      message.release();
      complete_inline_ = true;
      // An error keeps its code (its long message is what went over); a reply fails.
      const std::string why = "response metadata beyond the channel's limits (" +
                              std::to_string(options_.max_metadata_entries) + " entries, " +
                              std::to_string(options_.max_metadata_bytes) + " bytes)";
      const bool ok = v.header.status == status_code::ok;
      finish(v.header.call_id, ok ? status_code::resource_exhausted : v.header.status,
             ok ? std::string(why) : why + "; status message dropped");
      complete_inline_ = false;
      pump();
      return false;
    }
    client_context* ctx = c_ptr != nullptr ? c_ptr->context : nullptr;
    if (!extras::decode_response(v.extras, status_message,
                                 ctx != nullptr ? &ctx->mutable_server_initial_metadata() : nullptr,
                                 ctx != nullptr ? &ctx->mutable_server_trailing_metadata() : nullptr)) {
      protocol_violation(e, "response extras do not parse");
      return false;
    }
    return true;
  }

  void on_close(std::size_t e, std::uint64_t generation, const boost::system::error_code& reason) {
    endpoint_slot& slot = *slots_[e];
    if (generation != slot.generation || !slot.conn) return;
    if (!closed_)
      rdmarpc::logger()->debug("rdmarpc channel: connection to {} ended: {}", slot.name(), reason.message());
    // A clean close (the server shut down, or restarts) leaves the endpoint idle: the next call
    // reconnects at once; so does a local address change (the path moved, the peer is fine).
    // Anything else marks it failed, so calls go elsewhere for its backoff.
    const bool failed =
        reason != transport::errc::closed_by_peer && reason != transport::errc::address_changed;
    connection_ended(e, closed_ ? std::string("channel closed") : "connection lost: " + reason.message(),
                     failed);
  }

 private:
  channel_impl(boost::asio::any_io_executor ex, channel_options options)
      : ex_(std::move(ex)),
        io_ex_(ex_.target<boost::asio::io_context::executor_type>()),
        options_(std::move(options)),
        resolve_backoff_(options_.reconnect),
        resolve_timer_(ex_),
        deadlines_(ex_),
        random_(std::random_device{}()),
        chain_(options_.interceptors),
        watch_(ex_) {
    if (options_.max_in_flight == 0) options_.max_in_flight = 1;
    spare_replies_.reserve(kSpareReplyTypes);  // never moves: lent_reply_ points into it
  }

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
    auto deadline = context != nullptr ? context->deadline() : clock::time_point::max();
    // A call made on behalf of a server call never outlives its caller's deadline.
    if (context != nullptr && context->parent() != nullptr)
      deadline = std::min(deadline, context->parent()->deadline());
    if (deadline != clock::time_point::max() || options_.default_timeout == clock::duration::max())
      return deadline;
    const auto now = clock::now();
    return options_.default_timeout >= clock::time_point::max() - now ? clock::time_point::max()
                                                                      : now + options_.default_timeout;
  }

  bool at_capacity() const noexcept {
    return calls_.size() + streams_.size() >= options_.max_in_flight + options_.max_queued_calls;
  }

  // On ex_: the stream joins the channel (and is connected, or waits for a connection).
  void register_stream(const std::shared_ptr<stream_core>& core, bool serialized, bool wait_for_ready,
                       const stream_interception& icpt, call_verdict verdict) {
    if (icpt.asked != 0) [[unlikely]] {
      // Ended before it got here (cancelled; its end was reported without us): told now.
      if (core->ended()) return end_stream_interception(icpt, *core);
      if (verdict.code != status_code::ok) {
        core->fail(verdict.code, verdict.message);
        return end_stream_interception(icpt, *core);
      }
      // Any other end comes through stream_ended (which finds it here), the failures below too.
      auto held = icpt;
      held.core = core;
      intercepted_streams_.emplace(core->id(), std::move(held));
    }
    if (core->ended()) return;  // cancelled before it got here (its end was reported)
    if (!serialized)
      return core->fail(status_code::invalid_argument, "cannot serialize request (missing required fields?)");
    if (closed_) return core->fail(status_code::unavailable, "channel closed");
    if (at_capacity())
      return core->fail(status_code::resource_exhausted, "too many calls waiting on the channel");
    if (calls_.contains(core->id()) || streams_.contains(core->id()))
      return core->fail(status_code::resource_exhausted, "call id space exhausted");
    if (!wait_for_ready && watch_.published() == channel_state::transient_failure)
      return core->fail(status_code::unavailable, last_failure_);
    streams_.emplace(core->id(), open_stream{core, kNoEndpoint, wait_for_ready});
    core->arm_deadline();
    attach_waiting_streams();
    if (streams_.contains(core->id()) && streams_.at(core->id()).endpoint == kNoEndpoint) want_connections();
  }

  // The context is the core's (null once the user dropped the stream and may have destroyed it).
  void end_stream_interception(const stream_interception& icpt, stream_core& core) {
    const auto bytes = core.payload_bytes();
    const call_outcome outcome{core.final_code(), core.final_message(), bytes.sent, bytes.received,
                               clock::now() - icpt.started};
    core.with_client_context([&](const client_context* context) {
      chain_.end(icpt.asked, client_call_info{icpt.method, context, true}, outcome);
    });
  }

  // Routes a stream frame to its stream. A frame for an id we never used is a violation; one for a
  // stream that ended here (or lives on another connection) is dropped (it crossed our end).
  void on_stream_frame(std::size_t e, const frame::view& v, transport::received_message& message) {
    auto it = streams_.find(v.header.call_id);
    if (it == streams_.end() || it->second.endpoint != e) {
      if (v.header.call_id >= next_id_.load(std::memory_order_relaxed))
        protocol_violation(e, "stream frame for a stream never opened");
      return;
    }
    auto core = it->second.core;  // it may end (and leave streams_) inside on_frame
    core->on_frame(v, message);
  }

  // Connectivity --------------------------------------------------------------------------------
  // What the load balancer sees of endpoint e.
  auto status_of() const noexcept {
    return [this](std::size_t e) -> const endpoint_status& { return *slots_[e]; };
  }

  channel_state aggregate() const {
    if (closed_) return channel_state::shutdown;
    if (!resolved_) return resolving_ ? channel_state::connecting : resolve_state_;
    return load_balancer::aggregate(slots_.size(), status_of());
  }

  // Something waits for a connection (a call, a stream, a state waiter): the policy's endpoints
  // connect (load_balancer::connect_wanted).
  void want_connections() {
    if (closed_) return;
    if (!resolved_) return start_resolve();
    balancer_.connect_wanted(slots_.size(), status_of(), [this](std::size_t e) { start_connect(e); });
  }

  // Anything that wants a connection now: calls, streams, someone waiting for the state.
  bool has_demand() const noexcept { return !calls_.empty() || !streams_.empty() || watch_.has_waiters(); }

  void set_endpoints(const std::vector<transport::endpoint>& endpoints) {
    for (const auto& ep : endpoints)
      slots_.push_back(std::make_unique<endpoint_slot>(ex_, ep, options_.reconnect, options_));
    resolved_ = true;
  }

  // Host names become endpoints, once, on first use (all names together).
  void start_resolve() {
    if (resolving_ || closed_) return;
    resolving_ = true;
    publish_state();
    auto found = std::make_shared<std::vector<transport::endpoint>>();
    auto left = std::make_shared<std::size_t>(configured_.size());
    auto errors = std::make_shared<std::string>();
    for (const auto& ep : configured_) {
      transport::async_resolve(ex_, ep,
                               [self = shared_from_this(), ep, found, left, errors](
                                   boost::system::error_code ec, std::vector<transport::endpoint> addresses) {
                                 if (ec) {
                                   *errors += (errors->empty() ? "" : "; ") + std::string("cannot resolve ") +
                                              ep.to_uri();
                                 }
                                 for (auto& a : addresses) {
                                   if (std::find(found->begin(), found->end(), a) == found->end())
                                     found->push_back(std::move(a));
                                 }
                                 if (--*left == 0) self->resolved(std::move(*found), *errors);
                               });
    }
  }

  void resolved(std::vector<transport::endpoint> endpoints, const std::string& errors) {
    resolving_ = false;
    if (closed_) return;
    if (endpoints.empty()) {
      // Nothing resolved: the channel fails like an endpoint, and resolves again after a backoff.
      connect_failures_.fetch_add(1, std::memory_order_relaxed);
      resolve_state_ = channel_state::transient_failure;
      last_failure_ = errors;
      resolve_timer_.expires_after(resolve_backoff_.next(unit_random()));
      resolve_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
        if (ec) return;
        if (auto self = weak.lock()) {
          self->resolve_state_ = channel_state::idle;
          self->publish_state();
          if (self->has_demand()) self->want_connections();
        }
      });
      publish_state();
      fail_waiting_fail_fast();
      return;
    }
    if (!errors.empty()) rdmarpc::logger()->warn("rdmarpc channel: {}", errors);
    set_endpoints(endpoints);
    publish_state();
    want_connections();
  }

  void start_connect(std::size_t e) {
    endpoint_slot& slot = *slots_[e];
    slot.state = channel_state::connecting;
    publish_state();
    transport::async_connect(ex_, *slot.endpoint, options_.transport,
                             [self = shared_from_this(), e](const boost::system::error_code& ec,
                                                            std::shared_ptr<transport::connection> conn) {
                               self->connected(e, ec, std::move(conn));
                             });
  }

  void connected(std::size_t e, const boost::system::error_code& ec,
                 std::shared_ptr<transport::connection> conn) {
    endpoint_slot& slot = *slots_[e];
    if (closed_) {
      if (conn) conn->close();
      return;
    }
    if (ec) {
      connect_failures_.fetch_add(1, std::memory_order_relaxed);
      rdmarpc::logger()->debug("rdmarpc channel: connect to {} failed: {}", slot.name(), ec.message());
      return endpoint_failed(e, "cannot connect to " + slot.name() + ": " + ec.message());
    }
    attach(e, std::move(conn));
  }

  void attach(std::size_t e, std::shared_ptr<transport::connection> conn) {
    endpoint_slot& slot = *slots_[e];
    slot.conn = std::move(conn);
    slot.generation = ++generations_;
    slot.state = channel_state::ready;
    slot.backoff.reset();
    connects_.fetch_add(1, std::memory_order_relaxed);
    rdmarpc::logger()->debug("rdmarpc channel: connected to {}", slot.conn->remote_address());
    slot.conn->start(std::make_shared<connection_events>(shared_from_this(), e, slot.generation));
    start_heartbeats(e);
    publish_state();
    pump();
    attach_waiting_streams();
  }

  // Endpoint `e` failed (a connect attempt, or its connection): transient_failure, and a retry after
  // its backoff. When every endpoint has failed, calls that do not wait for ready fail; else the
  // policy moves on (pick_first tries the next endpoint at once).
  void endpoint_failed(std::size_t e, std::string why) {
    endpoint_slot& slot = *slots_[e];
    last_failure_ = std::move(why);
    if (!slot.endpoint) {
      // A given connection cannot be replaced: the channel is done.
      slot.state = channel_state::shutdown;
      return close_now(last_failure_.c_str());
    }
    slot.state = channel_state::transient_failure;
    slot.retry_timer.expires_after(slot.backoff.next(unit_random()));
    slot.retry_timer.async_wait([weak = weak_from_this(), e](const boost::system::error_code& ec) {
      if (ec) return;  // closed
      if (auto self = weak.lock()) self->retry_due(e);
    });
    publish_state();
    if (watch_.published() == channel_state::transient_failure) return fail_waiting_fail_fast();
    want_connections();
  }

  // An endpoint's backoff ended: it may connect again (at once if anything waits for it).
  void retry_due(std::size_t e) {
    endpoint_slot& slot = *slots_[e];
    if (closed_ || slot.state != channel_state::transient_failure) return;
    slot.state = channel_state::idle;
    publish_state();
    if (has_demand()) want_connections();
  }

  // Endpoint e's connection ended (closed, lost, heartbeat timeout, protocol error): what it carried
  // fails UNAVAILABLE with `why`; calls and streams that never reached it wait for the next one.
  // failed: the endpoint is in transient_failure for its backoff; else idle (a clean close).
  void connection_ended(std::size_t e, const std::string& why, bool failed) {
    endpoint_slot& slot = *slots_[e];
    auto conn = std::move(slot.conn);
    slot.draining = false;
    disconnects_.fetch_add(1, std::memory_order_relaxed);
    slot.generation = ++generations_;  // its on_close, and a wait for send room on it, are ignored
    slot.reserving = false;
    slot.heartbeats.stop();
    conn->close();
    fail_sent_on(e, status_code::unavailable, why);
    if (closed_) return;
    if (failed || !slot.endpoint) return endpoint_failed(e, why);
    slot.state = channel_state::idle;
    publish_state();
    if (has_demand()) want_connections();
  }

  // Fails the calls and streams carried by endpoint e's connection.
  void fail_sent_on(std::size_t e, status_code code, const std::string& message) {
    std::vector<std::uint32_t> ids;
    for (auto it = calls_.begin(); it != calls_.end(); ++it) {
      if (it->second->sent_on == e) ids.push_back(it->first);
    }
    for (const auto id : ids) finish(id, code, std::string(message), /*in_queue=*/false);
    std::vector<std::shared_ptr<stream_core>> ended;
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (it->second.endpoint == e) {
        ended.push_back(std::move(it->second.core));
        it = streams_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& core : ended) core->fail(code, message);
  }

  // Every endpoint failed: what waits for a connection fails, unless it waits for ready.
  void fail_waiting_fail_fast() {
    std::vector<std::uint32_t> ids;
    for (const auto id : queue_) {
      if (!calls_.at(id).wait_for_ready) ids.push_back(id);
    }
    for (const auto id : ids) finish(id, status_code::unavailable, std::string(last_failure_));
    std::vector<std::shared_ptr<stream_core>> failed;
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (it->second.endpoint == kNoEndpoint && !it->second.wait_for_ready) {
        failed.push_back(std::move(it->second.core));
        it = streams_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& core : failed) core->fail(status_code::unavailable, last_failure_);
  }

  // Streams waiting for a connection get one, picked like a call's.
  void attach_waiting_streams() {
    std::vector<std::uint32_t> waiting;
    for (const auto& [id, s] : streams_) {
      if (s.endpoint == kNoEndpoint) waiting.push_back(id);
    }
    for (const auto id : waiting) {
      auto it = streams_.find(id);  // attaching one may end another
      if (it == streams_.end()) continue;
      const std::size_t e = pick(/*need_room=*/false);
      if (e == kNoEndpoint) return;
      it->second.endpoint = e;
      auto core = it->second.core;
      core->attach(slots_[e]->conn);
      work_begins(e);
    }
  }

  // The endpoint for the next call: a ready one by the policy, or none. need_room: skip endpoints
  // whose connection has a wait for send room outstanding.
  std::size_t pick(bool need_room) { return balancer_.pick(slots_.size(), status_of(), need_room); }

  // Every change of an endpoint's state publishes the channel's (aggregate()).
  void publish_state() { watch_.publish(aggregate()); }

  double unit_random() { return std::uniform_real_distribution<double>(0.0, 1.0)(random_); }

  // Heartbeats (connection_heartbeats) ------------------------------------------------------------
  // The executor's heartbeat_ticker ticks every connection with the same settings from one timer;
  // nothing per message but liveness's flag.
  void start_heartbeats(std::size_t e) {
    endpoint_slot& slot = *slots_[e];
    slot.heartbeats.start(ex_, {},
                          [weak = weak_from_this(), e, gen = slot.generation](clock::time_point instant,
                                                                              clock::time_point ran_at) {
                            if (auto self = weak.lock()) self->heartbeat_tick(e, gen, instant, ran_at);
                          });
  }

  void heartbeat_tick(std::size_t e, std::uint64_t gen, clock::time_point instant, clock::time_point ran_at) {
    endpoint_slot& slot = *slots_[e];
    if (gen != slot.generation || !slot.conn) return;
    switch (slot.heartbeats.tick(instant, ran_at, carries_work(e), *slot.conn)) {
      case connection_heartbeats::tick_result::none: return;
      case connection_heartbeats::tick_result::ping_sent:
        pings_sent_.fetch_add(1, std::memory_order_relaxed);
        return;
      case connection_heartbeats::tick_result::peer_dead: return heartbeat_timed_out(e);
    }
  }

  // A ping or pong arrived on endpoint e (the clock is read for heartbeat frames only).
  void heard_heartbeat(std::size_t e) {
    endpoint_slot& slot = *slots_[e];
    slot.heartbeats.heard(clock::now(), *slot.conn, [&] { return carries_work(e); });
  }

  // Calls or a stream begin on endpoint e.
  void work_begins(std::size_t e) { slots_[e]->heartbeats.work_begins(); }

  // Whether endpoint e's connection carries calls waiting for replies or streams: then it checks
  // its own path with its own pings (connection_liveness), not only the shared ones.
  bool carries_work(std::size_t e) {
    if (in_flight_ == 0 && streams_.empty()) return false;
    if (slots_.size() == 1) return true;
    for (const auto& [id, s] : streams_) {
      if (s.endpoint == e) return true;
    }
    for (auto it = calls_.begin(); in_flight_ > 0 && it != calls_.end(); ++it) {
      if (it->second->sent_on == e) return true;
    }
    return false;
  }

  void on_ping(std::size_t e, std::uint64_t value) {
    pings_received_.fetch_add(1, std::memory_order_relaxed);
    endpoint_slot& slot = *slots_[e];
    (void)slot.heartbeats.send(frame::kind::pong, value,
                               *slot.conn);  // no room: whatever fills the queue is traffic too
  }

  void heartbeat_timed_out(std::size_t e) {
    heartbeat_timeouts_.fetch_add(1, std::memory_order_relaxed);
    const auto reason = make_error_code(transport::errc::connection_lost);
    rdmarpc::logger()->warn(
        "rdmarpc channel: no answer from {} to a heartbeat within {} ms: {}",
        slots_[e]->conn->remote_address(),
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.heartbeat_timeout).count(),
        reason.message());
    connection_ended(e, "connection lost: " + reason.message() + " (no heartbeat answer)", true);
  }

  // The server shuts down: new calls and streams go elsewhere (or wait for a reconnect); what
  // this connection carries finishes. Our answer tells the server nothing new follows it.
  void on_going_away(std::size_t e) {
    endpoint_slot& slot = *slots_[e];
    if (slot.draining) return;
    slot.draining = true;
    going_aways_.fetch_add(1, std::memory_order_relaxed);
    rdmarpc::logger()->debug("rdmarpc channel: {} is going away", slot.name());
    frame::header h;
    h.kind = frame::kind::going_away;
    send_header(e, h);  // nothing new was committed after it
    publish_state();
    attach_waiting_streams();
    pump();  // queued calls go to another endpoint, or wait (want_connections)
  }

  // A reset for call 0 ends the connection (the server closes it next): say why to every call.
  void on_connection_reset(std::size_t e, const frame::view& v) {
    std::string why;
    if (!extras::decode_response(v.extras, why)) return protocol_violation(e, "reset extras do not parse");
    if (why.empty()) why = "connection reset by the server";
    if (why == "too_many_pings") too_many_pings_.fetch_add(1, std::memory_order_relaxed);
    rdmarpc::logger()->warn("rdmarpc channel: {} closed the connection: {} ({})",
                            slots_[e]->conn->remote_address(), why, to_string(v.header.status));
    connection_ended(
        e, "connection closed by the server: " + why + " (" + std::string(to_string(v.header.status)) + ")",
        true);
  }

  void protocol_violation(std::size_t e, const char* why) {
    rdmarpc::logger()->warn("rdmarpc channel: closing connection to {}: {}",
                            slots_[e]->conn->remote_address(), why);
    // Fail now rather than waiting for on_close: the connection is not trustworthy any more. A wait
    // for send room on the old connection is ignored from now on (connection_ended resets
    // reserving): left set, it would keep pump() from ever sending on the next connection.
    connection_ended(e, std::string("connection closed: protocol error: ") + why, true);
  }

  // Calls ----------------------------------------------------------------------------------------
  bool on_own_thread() const noexcept { return io_ex_ != nullptr && io_ex_->running_in_this_thread(); }

  std::uint32_t allocate_id() noexcept {
    std::uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    if (id == 0) id = next_id_.fetch_add(1, std::memory_order_relaxed);  // 0 is never used
    return id;
  }

  // The interceptors' on_call_start for call c (on the caller's thread); a refusal fails it early.
  void intercept(pending_call& c) {
    c.started = clock::now();
    c.added_metadata.clear();
    c.request_bytes = c.response_bytes = 0;
    auto v = chain_.start(client_call_info{c.method, c.context, false}, c.added_metadata, c.intercepted);
    if (v.code != status_code::ok) {
      c.early_status = v.code;
      c.early_message = std::move(v.message);
    }
  }

  // The interceptors' on_call_end for call c (on our executor), before its handler runs.
  void end_interception(pending_call& c, status_code code, std::string_view message) {
    chain_.end(std::exchange(c.intercepted, 0), client_call_info{c.method, c.context, false},
               call_outcome{code, message, c.request_bytes, c.response_bytes, clock::now() - c.started});
  }

  // Extras (request metadata) and the serialized request into c.body, for a call that waits.
  static void serialize_into_body(pending_call& c, const google::protobuf::MessageLite& request) {
    if (c.context != nullptr) c.body = extras::encode_request(c.context->request_metadata());
    // The interceptors' entries after the caller's: two encodings of the extras message,
    // concatenated, are one message with both lists.
    if (!c.added_metadata.empty()) c.body += extras::encode_request(c.added_metadata);
    c.extras_length = static_cast<std::uint32_t>(c.body.size());
    if (c.body.size() > std::numeric_limits<std::uint32_t>::max()) {
      c.early_status = status_code::resource_exhausted;
      c.early_message = "request metadata too large";
    } else if (!request.AppendToString(&c.body)) {
      c.early_status = status_code::invalid_argument;
      c.early_message = "cannot serialize request (missing required fields?)";
    } else if ((c.request_bytes = c.body.size() - c.extras_length) >
               std::numeric_limits<std::uint32_t>::max()) {
      c.early_status = status_code::resource_exhausted;
      c.early_message = "request too large";
    }
  }

  // `request`: the caller's message, valid during this call only (null: c.body holds it).
  [[gnu::always_inline]] void submit(std::unique_ptr<pending_call> c,
                                     const google::protobuf::MessageLite* request) {
    const std::uint32_t id = c->id;
    if (c->early_status != status_code::ok) {
      const status_code code = c->early_status;
      std::string message = std::move(c->early_message);
      return complete(std::move(c), code, std::move(message));
    }
    if (closed_) return complete(std::move(c), status_code::unavailable, "channel closed");
    if (c->deadline != clock::time_point::max() && c->deadline <= clock::now())  // no clock read without one
      return complete(std::move(c), status_code::deadline_exceeded, "deadline exceeded");
    // Bound on everything the channel holds (sent or waiting, connected or not): back-pressure.
    if (at_capacity())
      return complete(std::move(c), status_code::resource_exhausted, "too many calls waiting on the channel");
    if (calls_.contains(id))
      return complete(std::move(c), status_code::resource_exhausted, "call id space exhausted");
    if (request != nullptr && c->method.request_may_lack_required && !request->IsInitialized()) {
      return complete(std::move(c), status_code::invalid_argument,
                      "cannot serialize request (missing required fields?)");
    }
    // Every endpoint failed and none is retrying yet: a fail-fast call fails now.
    if (!c->wait_for_ready && watch_.published() == channel_state::transient_failure)
      return complete(std::move(c), status_code::unavailable, std::string(last_failure_));
    const clock::time_point deadline = c->deadline;
    pending_call& call = *c;
    calls_.insert(id, std::move(c));
    if (deadline != clock::time_point::max()) deadlines_.watch(*this, id, deadline, calls_.size());
    // Nothing waits ahead of it: straight into the connection's send memory, no copy.
    if (request != nullptr && queue_.empty() && in_flight_ < options_.max_in_flight) {
      if (const std::size_t e = pick(/*need_room=*/true); e != kNoEndpoint && send_direct(e, call, *request))
        return;
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

  // The most a queued call's frame takes: its header has a timeout if the call has a deadline
  // (make_request_header may still leave it out, never put one in).
  static std::size_t queued_frame_size(const pending_call& c) noexcept {
    frame::header h;  // kind request
    if (c.deadline != clock::time_point::max()) h.flags = frame::kFlagHasTimeout;
    h.extras_length = c.extras_length;
    return frame::header_size(h) + c.body.size();
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

  // Serializes `request` into a reservation on endpoint e and commits it. False (nothing sent, call
  // untouched) when there is no room now or the call needs the slow path.
  bool send_direct(std::size_t e, pending_call& c, const google::protobuf::MessageLite& request) {
    const std::size_t payload = request.ByteSizeLong();
    const bool has_metadata =
        (c.context != nullptr && !c.context->request_metadata().empty()) || !c.added_metadata.empty();
    if (has_metadata || payload > std::numeric_limits<std::uint32_t>::max()) return false;
    frame::header h;
    if (!make_request_header(c, 0, static_cast<std::uint32_t>(payload), h)) return false;
    boost::system::error_code ec;
    const std::size_t head = frame::header_size(h);
    auto r = slots_[e]->conn->try_reserve(head + payload, ec);
    if (ec) return false;  // the queued path reports it (or waits for room)
    std::byte* out = r.data().data();
    frame::encode_header(h, r.data());
    request.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out + head));
    r.commit();
    c.request_bytes = payload;
    c.sent_on = e;
    ++in_flight_;
    work_begins(e);
    return true;
  }

  // Sends queued calls while in-flight slots, a ready connection and its send room allow.
  void pump() {
    while (!queue_.empty() && in_flight_ < options_.max_in_flight) {
      const std::size_t e = pick(/*need_room=*/true);
      if (e == kNoEndpoint) {
        if (pick(/*need_room=*/false) == kNoEndpoint) want_connections();
        return;
      }
      endpoint_slot& slot = *slots_[e];
      const std::uint32_t id = queue_.front();
      pending_call& c = calls_.at(id);
      boost::system::error_code ec;
      auto r = slot.conn->try_reserve(queued_frame_size(c), ec);
      if (ec == boost::asio::error::would_block) {
        wait_for_room(e, queued_frame_size(c));
        continue;  // round_robin may find room on another endpoint
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
      send_queued(e, std::move(r));
    }
  }

  // Writes the queue's first call into `r` (endpoint e's, large enough for it) and commits it.
  void send_queued(std::size_t e, transport::send_reservation r) {
    const std::uint32_t id = queue_.front();
    queue_.pop_front();
    pending_call& c = calls_.at(id);
    frame::header h;
    if (!make_request_header(c, c.extras_length, static_cast<std::uint32_t>(c.body.size() - c.extras_length),
                             h)) {
      return finish(id, status_code::deadline_exceeded, "deadline exceeded", /*in_queue=*/false);
    }
    std::byte* out = r.data().data();
    const std::size_t head = frame::encode_header(h, r.data());
    std::memcpy(out + head, c.body.data(), c.body.size());
    r.commit(head + c.body.size());
    c.sent_on = e;
    std::string().swap(c.body);
    ++in_flight_;
    work_begins(e);
  }

  // Endpoint e's connection has no room: wait for it (the connection's one back-pressure mechanism).
  void wait_for_room(std::size_t e, std::size_t bytes) {
    endpoint_slot& slot = *slots_[e];
    slot.reserving = true;
    slot.conn->async_reserve(bytes, [self = shared_from_this(), e, gen = slot.generation](
                                        boost::system::error_code ec, transport::send_reservation r) {
      endpoint_slot& s = *self->slots_[e];
      if (gen != s.generation) return;  // that connection is gone; r is dropped with it
      s.reserving = false;
      if (ec) return;  // the connection ended: on_close fails its calls
      // The queue may have changed meanwhile (a deadline, a cancellation): use the room if it fits.
      if (!self->queue_.empty() && self->in_flight_ < self->options_.max_in_flight &&
          self->queued_frame_size(self->calls_.at(self->queue_.front())) <= r.size()) {
        self->send_queued(e, std::move(r));
      } else {
        r.cancel();
      }
      self->pump();
    });
  }

  // call_deadlines' owner side: the calls' deadlines share one timer.
  friend class call_deadlines<std::uint32_t>;
  // Whether an entry is still a call's (ids come back after wrapping; the deadline too says it is
  // that call's own).
  bool deadline_live(std::uint32_t id, clock::time_point deadline) {
    const auto it = calls_.find(id);
    return it != calls_.end() && it->second->deadline == deadline;
  }
  void deadline_passed(std::uint32_t id) { expire(id, status_code::deadline_exceeded, "deadline exceeded"); }
  void deadlines_due() { deadlines_.fire(*this); }

  // Deadline or cancellation of call `id` (no-op when it already finished).
  void expire(std::uint32_t id, status_code code, const char* why) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    const std::size_t e = it->second->sent_on;
    if (e != kNoEndpoint && slots_[e]->conn) send_cancel(e, id);
    finish(id, code, why);
    pump();
  }

  // Tells the server to stop working on call `id`: now, or once the connection has room (behind
  // what already waits for room; at most one per call that was sent). Dropped only when the
  // connection ends, which stops the server's handler anyway.
  void send_cancel(std::size_t e, std::uint32_t id) {
    frame::header h;
    h.kind = frame::kind::cancel;
    h.call_id = id;
    send_header(e, h);
  }

  // A header-only frame on endpoint e's connection: now, or once it has room, behind what waits for
  // room already. Dropped only when that connection ends (its calls are gone with it).
  void send_header(std::size_t e, const frame::header& h) {
    endpoint_slot& slot = *slots_[e];
    const auto head = frame::encode_full_header(h);
    if (slot.conn->send_copy(boost::asio::buffer(head)) != boost::asio::error::would_block) return;
    slot.conn->async_reserve(frame::kHeaderSize,
                             [self = shared_from_this(), e, gen = slot.generation, head](
                                 boost::system::error_code ec, transport::send_reservation r) {
                               if (ec || gen != self->slots_[e]->generation)
                                 return;  // that connection ended: its calls are gone
                               std::memcpy(r.data().data(), head.data(), head.size());
                               r.commit(head.size());
                             });
  }

  // The message by rvalue reference: one string travels from the frame to the handler, unmoved.
  void finish(std::uint32_t id, status_code code, std::string&& message, bool in_queue = true) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    finish_at(it, code, std::move(message), in_queue);
  }
  [[gnu::always_inline]] void finish_at(call_table<pending_call>::iterator it, status_code code,
                                        std::string&& message, bool in_queue = true) {
    const std::uint32_t id = it->first;
    auto c = calls_.extract(it);
    if (c->sent()) {
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
    for (auto& [id, c] : calls) complete(std::move(c), code, std::string(message));
    auto streams = std::exchange(streams_, {});
    for (auto& [id, s] : streams) s.core->fail(code, message);
  }

  void close_now(const char* why) {
    const std::string reason = why;  // may point into last_failure_
    if (closed_ && calls_.empty() && streams_.empty()) return;
    closed_ = true;
    resolve_timer_.cancel();
    deadlines_.stop();
    for (auto& slot : slots_) {
      slot->retry_timer.cancel();
      slot->heartbeats.stop();
      slot->state = channel_state::shutdown;
    }
    fail_all(status_code::unavailable, reason);
    for (auto& slot : slots_) {
      // Its on_close follows (ignored: no calls left).
      if (auto conn = std::exchange(slot->conn, nullptr)) conn->close();
      slot->generation = ++generations_;
    }
    given_.reset();
    publish_state();
  }

  void maybe_close_released() {
    if (released_ && calls_.empty() && streams_.empty() && !closed_) close_now("channel released");
  }

  // Hands the call's status to its handler on the handler's associated executor: inline only for
  // the call whose reply on_message is processing (complete_inline_), else queued behind us.
  void complete(std::unique_ptr<pending_call> c, status_code code, std::string&& message) {
    // Both taken before an interceptor's on_call_end could start (and complete) another call.
    spare_reply_message* const lent = std::exchange(lent_reply_, nullptr);
    const bool inline_ok = std::exchange(complete_inline_, false);
    // The reply is not lent again until this call is done with it (were an interceptor or the
    // handler to run the io_context meanwhile).
    const struct lend_scope {
      spare_reply_message* s;
      explicit lend_scope(spare_reply_message* spare) : s(spare) {
        if (s != nullptr) s->lent = true;
      }
      ~lend_scope() {
        if (s != nullptr) s->lent = false;
      }
    } lending{lent};
    if (c->intercepted != 0) [[unlikely]]
      end_interception(*c, code, message);
    if (c->context != nullptr) c->context->set_result(code, std::move(message));
    (code == status_code::ok ? calls_ok_ : calls_failed_).fetch_add(1, std::memory_order_relaxed);
    auto op = std::move(c->op);
    auto io_work = std::move(c->io_work);  // released after the completion is posted
    // (Optional: an empty any_io_executor costs a type-erased call to make and another to destroy.)
    std::optional<boost::asio::any_io_executor> work;
    if (!io_work) [[unlikely]]
      work.emplace(std::move(c->work));
    keep_call(std::move(c));
    const boost::system::error_code ec =
        code == status_code::ok ? boost::system::error_code{} : make_error_code(code);
    // A lent reply means on_message found the handler runs on our io_context (no need to ask again).
    if (lent != nullptr || (inline_ok && io_ex_ != nullptr && op->runs_on(*io_ex_))) {
      // The handler runs on our io_context, and we are on it: call it here, without wrapping it
      // for a type-erased dispatch (what dispatch would do, minus its cost).
      if (lent != nullptr) {  // a handler's exception comes out of run()
        complete_in_place_with(std::move(op), ex_,
                               [ec, lent](unary_op& o) { o.complete_lent(ec, *lent->message); });
      } else {
        complete_in_place(std::move(op), ec, ex_);
      }
      if (released_) maybe_close_released();
      return;
    }
    // The io_context's own executor as the default: converting it is free, converting the
    // type-erased ex_ into the handler's executor type costs an allocation per call.
    auto target = io_ex_ != nullptr ? op->executor(*io_ex_) : op->executor(ex_);
    detail::posted_completion<unary_op> completion{std::move(op), ec, std::move(target)};
    if (inline_ok) {
      // Runs here when the handler's executor runs this thread (a strand over our io_context), else
      // is queued there. Its exception must not unwind through the transport's delivery loop (on
      // rdma, the rest of a completion batch would be lost): it comes out of run() later, as
      // complete_in_place's does.
      try {
        boost::asio::dispatch(std::move(completion));
      } catch (...) {
        rethrow_from_run(ex_);
      }
    } else {
      // defer: a continuation of the handler running now, so Asio keeps it in this thread's own
      // queue (no lock, no reactor interrupt) when that is ex_'s thread.
      boost::asio::defer(ex_, std::move(completion));
    }
    if (released_) maybe_close_released();
  }

  // Call records are reused (on ex_ only): no allocation per call in steady state.
  static constexpr std::size_t kSpareCalls = 64;

  struct spare_reply_message {
    const std::type_info* type;
    std::unique_ptr<google::protobuf::MessageLite> message;
    bool lent = false;  // a handler is reading it
  };

  // A reply completed in place is parsed into a message the channel keeps, one per reply type, and
  // lent to the handler (unary_op::complete_lent): a handler that reads the reply rather than moving
  // it out leaves its memory for the next reply, so such a call allocates nothing. Only small
  // replies are lent, so what a spare keeps (the last reply, its strings' capacity, cleared
  // repeated elements) is shaped by at most this much wire data.
  static constexpr std::size_t kLentReplyMaxBytes = 4 * 1024;
  static constexpr std::size_t kSpareReplyTypes = 16;  // beyond: replies of other types are not lent

  // The spare for `reply`'s type (made on first use); null when none can be lent: too many types,
  // or it is lent already (a handler reading it runs the io_context).
  spare_reply_message* spare_reply(const google::protobuf::MessageLite& reply) {
    const std::type_info* type = &typeid(reply);  // by address: a same-named type elsewhere is not it
    for (auto& spare : spare_replies_) {
      if (spare.type == type) return spare.lent ? nullptr : &spare;
    }
    if (spare_replies_.size() >= kSpareReplyTypes) return nullptr;
    std::unique_ptr<google::protobuf::MessageLite> message(reply.New());
    if (message == nullptr) return nullptr;
    spare_replies_.push_back({type, std::move(message)});
    return &spare_replies_.back();
  }

  void keep_call(std::unique_ptr<pending_call> c) {
    // Records are recycled on an io_context's own executor, whose one thread runs everything here
    // (complete() runs on ex_); not through a strand.
    if (io_ex_ == nullptr) return;
    BOOST_ASSERT(io_ex_->running_in_this_thread());
    c->op.reset();
    c->io_work.reset();
    if (c->work != nullptr) c->work = {};
    c->context = nullptr;
    c->body.clear();
    c->extras_length = 0;
    c->deadline = clock::time_point::max();
    c->sent_on = kNoEndpoint;
    c->wait_for_ready = false;
    c->early_status = status_code::ok;
    c->early_message.clear();
    calls_.keep(std::move(c));
  }

  const boost::asio::any_io_executor ex_;
  const boost::asio::io_context::executor_type* const io_ex_;  // ex_'s target when an io_context's
  channel_options options_;

  // Owned by ex_:
  std::vector<transport::endpoint> configured_;        // as given; names resolve on first use
  std::vector<std::unique_ptr<endpoint_slot>> slots_;  // resolved endpoints, in order
  std::shared_ptr<transport::connection> given_;       // create(connection), until adopted
  bool resolved_ = false;
  bool resolving_ = false;
  channel_state resolve_state_ = channel_state::idle;  // before resolved_: idle or transient_failure
  reconnect_backoff resolve_backoff_;
  boost::asio::steady_timer resolve_timer_;
  call_deadlines<std::uint32_t> deadlines_;     // of the calls in calls_ that have one
  std::string last_failure_ = "not connected";  // why the last endpoint failed: fail-fast calls' message
  std::uint64_t generations_ = 0;               // connection generations, unique across endpoints
  load_balancer balancer_{options_.load_balancing};
  std::minstd_rand random_;                            // backoff jitter
  const interceptor_chain<client_interceptor> chain_;  // channel_options::interceptors
  channel_state_watch watch_;  // the published state (read from any thread) and its waiters
  bool closed_ = false;
  bool released_ = false;
  bool complete_inline_ = false;                            // see on_message and complete
  spare_reply_message* lent_reply_ = nullptr;               // on_message parsed the reply into it
  std::vector<spare_reply_message> spare_replies_;          // see spare_reply
  call_table<pending_call> calls_{kSpareCalls};             // queued and sent
  std::deque<std::uint32_t> queue_;                         // not yet sent, in order
  std::size_t in_flight_ = 0;                               // sent, not answered
  std::unordered_map<std::uint32_t, open_stream> streams_;  // open streams
  // Streams whose interceptors are owed on_call_end (only with interceptors), by id.
  std::unordered_map<std::uint32_t, stream_interception> intercepted_streams_;

  // Any thread:
  std::atomic<std::uint32_t> next_id_{1};
  std::atomic<std::uint64_t> calls_started_{0}, calls_ok_{0}, calls_failed_{0}, connects_{0},
      connect_failures_{0}, disconnects_{0}, going_aways_{0};
  std::atomic<std::uint64_t> pings_sent_{0}, pongs_received_{0}, pings_received_{0}, heartbeat_timeouts_{0},
      too_many_pings_{0};
};

void connection_events::on_message(transport::received_message message) {
  channel_->on_message(endpoint_, generation_, message);
}

void connection_events::on_close(const boost::system::error_code& reason) {
  channel_->on_close(endpoint_, generation_, reason);
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
  channel_state state(bool try_to_connect) override { return impl_->state(try_to_connect); }
  void wait_for_state_change(channel_state last_observed,
                             boost::asio::any_completion_handler<state_change_signature> handler) override {
    impl_->wait_for_state_change(last_observed, std::move(handler));
  }
  channel_stats stats() const override { return impl_->stats(); }

 private:
  std::shared_ptr<channel_impl> impl_;
};

}  // namespace

std::shared_ptr<channel> channel::create(executor_type ex, std::string_view uri, channel_options options) {
  auto endpoints = transport::parse_endpoint_list(uri);
  if (!endpoints)
    throw boost::system::system_error(endpoints.error(),
                                      "rdmarpc::channel::create(" + std::string(uri) + ")");
  return std::make_shared<channel_handle>(
      std::make_shared<channel_impl>(std::move(ex), std::move(*endpoints), std::move(options)));
}

std::shared_ptr<channel> channel::create(std::shared_ptr<transport::connection> connection,
                                         channel_options options) {
  auto impl = std::make_shared<channel_impl>(std::move(connection), std::move(options));
  impl->adopt();
  return std::make_shared<channel_handle>(std::move(impl));
}

}  // namespace rdmarpc
