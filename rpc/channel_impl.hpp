#pragma once
// channel_impl: what an rdmarpc::channel is behind the handle channel::create returns: its endpoints
// and their connections, and the unary calls and streams they carry. Private to rpc/: channel.cpp
// holds the call path, channel_endpoints.cpp the endpoints (resolving, connecting, reconnects,
// heartbeats, closing), channel_streams.cpp the streams. The members declared inline (the call
// path) are defined in channel.cpp, the only file that may call them. Layer: rpc. Threading:
// everything owned by the channel's executor (ex_) runs there; calls and streams start from any
// thread; counters and the published state are read from any thread.

#include <google/protobuf/message_lite.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rpc/call_deadlines.hpp"
#include "rpc/call_table.hpp"
#include "rpc/channel.hpp"
#include "rpc/channel_state_watch.hpp"
#include "rpc/connection_heartbeats.hpp"
#include "rpc/frame.hpp"
#include "rpc/interceptor_chain.hpp"
#include "rpc/server_context.hpp"
#include "rpc/stream_core.hpp"
#include "transport/connect.hpp"
#include "transport/resolve.hpp"

namespace rdmarpc::channel_detail {

using clock = std::chrono::steady_clock;
inline constexpr std::size_t kNoEndpoint = load_balancer::none;

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
  void adopt();

  boost::asio::any_io_executor get_executor() const noexcept { return ex_; }

  inline void start_unary_call(const method_descriptor& method, client_context* context,
                               const google::protobuf::MessageLite& request, unary_op_ptr op);

  void close();

  std::shared_ptr<stream_io> start_stream(const method_descriptor& method, client_context* context,
                                          const google::protobuf::MessageLite* first_request);

  // A stream ended and flushed what it had to send (stream_core::owner).
  void stream_ended(std::uint32_t id, status_code code) override;

  // The user dropped its last reference: finish the calls already made, then close.
  // The last handle is gone. If the executor's io_context is destroyed before this task runs, the
  // task is destroyed unrun and abandon() breaks the channel -> connection -> connection_events ->
  // channel cycle, so a program that drops its channel and then its io_context leaks nothing.
  void release();

  // Only from release_task's destructor, when the io_context is being destroyed: nothing runs on it
  // any more, so the connections are dropped without closing them (their sockets close with them).
  void abandon() noexcept;

  channel_state state(bool try_to_connect);

  void wait_for_state_change(channel_state last,
                             boost::asio::any_completion_handler<channel::state_change_signature> h);

  channel_stats stats() const;

  // Connection events (on ex_) ----------------------------------------------------------------
  [[gnu::always_inline]] inline void on_message(std::size_t e, std::uint64_t generation,
                                                transport::received_message& message);

  // A response's extras: limits first (nothing of its metadata is parsed or allocated before they
  // hold), then its status message and the server's metadata (into the call's context; a call
  // without one does not want it). False when the response was handled here (a violation, or a
  // call failed for metadata beyond the limits).
  inline bool take_response_extras(std::size_t e, const frame::view& v, pending_call* c_ptr,
                                   transport::received_message& message, std::string& status_message);

  void on_close(std::size_t e, std::uint64_t generation, const boost::system::error_code& reason);

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
                       const stream_interception& icpt, call_verdict verdict);

  // The context is the core's (null once the user dropped the stream and may have destroyed it).
  void end_stream_interception(const stream_interception& icpt, stream_core& core);

  // Routes a stream frame to its stream. A frame for an id we never used is a violation; one for a
  // stream that ended here (or lives on another connection) is dropped (it crossed our end).
  void on_stream_frame(std::size_t e, const frame::view& v, transport::received_message& message);

  // Connectivity --------------------------------------------------------------------------------
  // What the load balancer sees of endpoint e.
  auto status_of() const noexcept {
    return [this](std::size_t e) -> const endpoint_status& { return *slots_[e]; };
  }

  channel_state aggregate() const;

  // Something waits for a connection (a call, a stream, a state waiter): the policy's endpoints
  // connect (load_balancer::connect_wanted).
  void want_connections();

  // Anything that wants a connection now: calls, streams, someone waiting for the state.
  bool has_demand() const noexcept { return !calls_.empty() || !streams_.empty() || watch_.has_waiters(); }

  void set_endpoints(const std::vector<transport::endpoint>& endpoints);

  // Host names become endpoints, once, on first use (all names together).
  void start_resolve();

  void resolved(std::vector<transport::endpoint> endpoints, const std::string& errors);

  void start_connect(std::size_t e);

  void connected(std::size_t e, const boost::system::error_code& ec,
                 std::shared_ptr<transport::connection> conn);

  void attach(std::size_t e, std::shared_ptr<transport::connection> conn);

  // Endpoint `e` failed (a connect attempt, or its connection): transient_failure, and a retry after
  // its backoff. When every endpoint has failed, calls that do not wait for ready fail; else the
  // policy moves on (pick_first tries the next endpoint at once).
  void endpoint_failed(std::size_t e, std::string why);

  // An endpoint's backoff ended: it may connect again (at once if anything waits for it).
  void retry_due(std::size_t e);

  // Endpoint e's connection ended (closed, lost, heartbeat timeout, protocol error): what it carried
  // fails UNAVAILABLE with `why`; calls and streams that never reached it wait for the next one.
  // failed: the endpoint is in transient_failure for its backoff; else idle (a clean close).
  void connection_ended(std::size_t e, const std::string& why, bool failed);

  // Fails the calls and streams carried by endpoint e's connection.
  void fail_sent_on(std::size_t e, status_code code, const std::string& message);

  // Every endpoint failed: what waits for a connection fails, unless it waits for ready.
  void fail_waiting_fail_fast();

  // Streams waiting for a connection get one, picked like a call's.
  void attach_waiting_streams();

  // The endpoint for the next call: a ready one by the policy, or none. need_room: skip endpoints
  // whose connection has a wait for send room outstanding.
  std::size_t pick(bool need_room) { return balancer_.pick(slots_.size(), status_of(), need_room); }

  // Every change of an endpoint's state publishes the channel's (aggregate()).
  void publish_state() { watch_.publish(aggregate()); }

  double unit_random() { return std::uniform_real_distribution<double>(0.0, 1.0)(random_); }

  // Heartbeats (connection_heartbeats) ------------------------------------------------------------
  // The executor's heartbeat_ticker ticks every connection with the same settings from one timer;
  // nothing per message but liveness's flag.
  void start_heartbeats(std::size_t e);

  void heartbeat_tick(std::size_t e, std::uint64_t gen, clock::time_point instant, clock::time_point ran_at);

  // A ping or pong arrived on endpoint e (the clock is read for heartbeat frames only).
  void heard_heartbeat(std::size_t e);

  // Calls or a stream begin on endpoint e.
  void work_begins(std::size_t e) { slots_[e]->heartbeats.work_begins(); }

  // Whether endpoint e's connection carries calls waiting for replies or streams: then it checks
  // its own path with its own pings (connection_liveness), not only the shared ones.
  bool carries_work(std::size_t e);

  void on_ping(std::size_t e, std::uint64_t value);

  void heartbeat_timed_out(std::size_t e);

  // The server shuts down: new calls and streams go elsewhere (or wait for a reconnect); what
  // this connection carries finishes. Our answer tells the server nothing new follows it.
  void on_going_away(std::size_t e);

  // A reset for call 0 ends the connection (the server closes it next): say why to every call.
  void on_connection_reset(std::size_t e, const frame::view& v);

  void protocol_violation(std::size_t e, const char* why);

  // Calls ----------------------------------------------------------------------------------------
  bool on_own_thread() const noexcept { return io_ex_ != nullptr && io_ex_->running_in_this_thread(); }

  std::uint32_t allocate_id() noexcept {
    std::uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    if (id == 0) id = next_id_.fetch_add(1, std::memory_order_relaxed);  // 0 is never used
    return id;
  }

  // The interceptors' on_call_start for call c (on the caller's thread); a refusal fails it early.
  inline void intercept(pending_call& c);

  // The interceptors' on_call_end for call c (on our executor), before its handler runs.
  inline void end_interception(pending_call& c, status_code code, std::string_view message);

  // Extras (request metadata) and the serialized request into c.body, for a call that waits.
  static inline void serialize_into_body(pending_call& c, const google::protobuf::MessageLite& request);

  // `request`: the caller's message, valid during this call only (null: c.body holds it).
  [[gnu::always_inline]] inline void submit(std::unique_ptr<pending_call> c,
                                            const google::protobuf::MessageLite* request);

  // The most a queued call's frame takes: its header has a timeout if the call has a deadline
  // (make_request_header may still leave it out, never put one in).
  static inline std::size_t queued_frame_size(const pending_call& c) noexcept;

  // The request frame header for `c` (with its remaining time); false if its deadline passed.
  inline bool make_request_header(const pending_call& c, std::uint32_t extras_length,
                                  std::uint32_t payload_length, frame::header& h) const;

  // Serializes `request` into a reservation on endpoint e and commits it. False (nothing sent, call
  // untouched) when there is no room now or the call needs the slow path.
  [[gnu::always_inline]] inline bool send_direct(std::size_t e, pending_call& c,
                                                 const google::protobuf::MessageLite& request);

  // Sends queued calls while in-flight slots, a ready connection and its send room allow.
  void pump();

  // Writes the queue's first call into `r` (endpoint e's, large enough for it) and commits it.
  inline void send_queued(std::size_t e, transport::send_reservation r);

  // Endpoint e's connection has no room: wait for it (the connection's one back-pressure mechanism).
  inline void wait_for_room(std::size_t e, std::size_t bytes);

  // call_deadlines' owner side: the calls' deadlines share one timer.
  friend class call_deadlines<std::uint32_t>;
  // Whether an entry is still a call's (ids come back after wrapping; the deadline too says it is
  // that call's own).
  bool deadline_live(std::uint32_t id, clock::time_point deadline);
  void deadline_passed(std::uint32_t id) { expire(id, status_code::deadline_exceeded, "deadline exceeded"); }
  void deadlines_due() { deadlines_.fire(*this); }

  // Deadline or cancellation of call `id` (no-op when it already finished).
  void expire(std::uint32_t id, status_code code, const char* why);

  // Tells the server to stop working on call `id`: now, or once the connection has room (behind
  // what already waits for room; at most one per call that was sent). Dropped only when the
  // connection ends, which stops the server's handler anyway.
  inline void send_cancel(std::size_t e, std::uint32_t id);

  // A header-only frame on endpoint e's connection: now, or once it has room, behind what waits for
  // room already. Dropped only when that connection ends (its calls are gone with it).
  void send_header(std::size_t e, const frame::header& h);

  // The message by rvalue reference: one string travels from the frame to the handler, unmoved.
  void finish(std::uint32_t id, status_code code, std::string&& message, bool in_queue = true);
  [[gnu::always_inline]] inline void finish_at(call_table<pending_call>::iterator it, status_code code,
                                               std::string&& message, bool in_queue = true);

  void fail_all(status_code code, const std::string& message);

  void close_now(const char* why);

  void maybe_close_released();

  // Hands the call's status to its handler on the handler's associated executor: inline only for
  // the call whose reply on_message is processing (complete_inline_), else queued behind us.
  void complete(std::unique_ptr<pending_call> c, status_code code, std::string&& message);

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
  [[gnu::always_inline]] inline spare_reply_message* spare_reply(const google::protobuf::MessageLite& reply);

  [[gnu::always_inline]] inline void keep_call(std::unique_ptr<pending_call> c);

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

}  // namespace rdmarpc::channel_detail
