#pragma once
// server_connection_impl: what a server_connection is behind server_connection::create: one
// connection's calls and streams, its heartbeats, limits and going away. Private to rpc/:
// server_connection.cpp holds the unary call path (frames in, a request parsed and its handler
// started, its reply out; cancel frames, refusals, interceptors), server_connection_streams.cpp the
// streams, server_connection_lifecycle.cpp starting, figures, going away, heartbeat ticks and pings,
// protocol violations and closing. The members declared inline (the call path) are defined in
// server_connection.cpp, the only file that may call them. Layer: rpc. Threading: everything runs
// on the connection's executor, but for a handler's server_done invoked from another thread.

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cassert>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "log/log.hpp"
#include "rpc/call_deadlines.hpp"
#include "rpc/call_table.hpp"
#include "rpc/connection_heartbeats.hpp"
#include "rpc/extras.hpp"
#include "rpc/frame.hpp"
#include "rpc/liveness.hpp"
#include "rpc/server_connection.hpp"
#include "rpc/stream_core.hpp"

namespace rdmarpc::server_connection_detail {

using clock = std::chrono::steady_clock;

// A call's passage through the server's interceptors: how many were asked (on_call_end is owed to
// them), when, and the response metadata they added (moved into the call's context).
struct interception {
  std::uint16_t asked = 0;
  clock::time_point started{};
  metadata* initial = nullptr;  // what they added (the connection's scratch), when they ran
  void add_initial_to(server_context& ctx) {
    if (initial == nullptr || initial->empty()) return;
    for (auto& [key, value] : *initial) ctx.add_initial_metadata(std::move(key), std::move(value));
    initial->clear();
  }
  // A refused call's: never sent, and not kept until the next call.
  void drop_initial() noexcept {
    if (initial != nullptr) initial->clear();
  }
};

// One request being served. Owned by its connection until its reply is sent; then kept for
// the next request (ctx too: reused, not rebuilt, so reuse allocates nothing).
struct active_call {
  std::optional<server_context> ctx;
  boost::asio::cancellation_signal signal;  // terminal cancellation into the handler coroutine
  // The typed request (parsed from the receive buffer, which was released before the handler
  // started: holding it would pin an rdma receive slot, a peer credit) and the handler's reply,
  // and the method it is for. A kept record keeps both (emptied) for a next call of that method.
  std::unique_ptr<server_call> call;
  const method_entry* method = nullptr;
  // While its handler's start() is on the stack: where forget() parks the record (not reused
  // before start() returns, as start() may still touch the call object and the context).
  std::unique_ptr<active_call>* park_slot = nullptr;
  std::uint32_t serial = 0;  // tells this call from an earlier one with the same id (server_done keys)
  bool done = false;         // the handler finished; the reply waits for send room
  // While the reply waits for room: cancels that wait (shared with the waiting handler, which
  // must outlive nothing it refers to).
  std::shared_ptr<boost::asio::cancellation_signal> reply_wait;
  std::uint16_t intercepted = 0;  // interceptors owed on_call_end (0 once it ran)
  clock::time_point started{};    // when the interceptors were asked
  std::size_t request_bytes = 0;
};

// One stream being served: its context, its stream_core and the handler's call object. Removed
// once the handler finished and the stream ended (both, in either order).
struct active_stream {
  active_stream(boost::asio::any_io_executor ex, std::string_view method,
                std::shared_ptr<const std::string> peer, clock::time_point deadline, metadata md)
      : ctx(std::move(ex), method, std::move(peer), deadline, std::move(md)) {}
  server_context ctx;
  boost::asio::cancellation_signal signal;  // terminal cancellation into the handler coroutine
  std::shared_ptr<stream_core> stream;
  std::shared_ptr<server_stream_call> call;
  const method_entry* method = nullptr;
  std::uint32_t serial = 0;
  bool done = false;              // the handler finished
  bool ended = false;             // the stream ended and flushed
  std::uint16_t intercepted = 0;  // interceptors owed on_call_end (0 once it ran)
  clock::time_point started{};
};

// A response frame's parts; the reply is serialized straight into the reservation.
struct response_frame {
  // `ctx`: the call's context, whose initial and trailing metadata go with the response (null for
  // a refusal, which has no call behind it).
  response_frame(std::uint32_t id, status_code code, std::string_view message,
                 const google::protobuf::MessageLite* reply, const server_context* ctx = nullptr,
                 frame::kind kind = frame::kind::response)
      : extras(ctx != nullptr
                   ? extras::encode_response(message, ctx->initial_metadata(), ctx->trailing_metadata())
                   : extras::encode_response(message)),
        reply(reply),
        reply_size(reply ? reply->ByteSizeLong() : 0) {
    h.kind = kind;
    h.call_id = id;
    h.status = code;
    h.extras_length = static_cast<std::uint32_t>(extras.size());
    h.payload_length = static_cast<std::uint32_t>(reply_size);
    head = frame::header_size(h);
  }
  std::size_t size() const noexcept { return head + extras.size() + reply_size; }
  void write(transport::send_reservation&& r) const {
    std::byte* out = r.data().data();
    frame::encode_header(h, r.data());
    if (!extras.empty()) std::memcpy(out + head, extras.data(), extras.size());
    if (reply != nullptr) {
      reply->SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out + head + extras.size()));
    }
    r.commit(size());
  }

  frame::header h;
  std::size_t head = 0;  // header_size(h)
  std::string extras;    // empty (no allocation) for an OK response
  const google::protobuf::MessageLite* reply;
  std::size_t reply_size;
};

class connection_impl final : public server_connection,
                              public server_done::target,
                              public stream_core::owner,
                              public std::enable_shared_from_this<connection_impl> {
 public:
  connection_impl(std::shared_ptr<server_connection::owner> srv, std::shared_ptr<transport::connection> conn)
      : server_(std::move(srv)),
        opts_(server_->options()),
        conn_(std::move(conn)),
        ex_(conn_->get_executor()),
        io_ex_(ex_.target<boost::asio::io_context::executor_type>()),
        peer_(std::make_shared<const std::string>(conn_->remote_address())),
        peer_info_(peer_info::from_address(*peer_)),
        chain_(server_->interceptors()),
        metrics_(server_->metrics()),
        heartbeats_(opts_.heartbeat_interval, opts_.heartbeat_timeout),
        policer_(opts_.min_ping_interval_allowed, opts_.max_ping_strikes) {}

  // A lent server_done was moved (a handler keeps it to answer later).
  std::shared_ptr<server_done::target> keep_alive() noexcept override { return shared_from_this(); }

  // A handler's server_done was invoked (any thread): finish the call on our executor, at once
  // when we are on it (a callback handler answering before it returns: no hop at all).
  void call_done(std::uint64_t key, std::exception_ptr error) noexcept override;
  // Invoked lent: inside the handler's start(), which on_request calls on our executor's thread.
  void call_done_lent(std::uint64_t key, std::exception_ptr error) noexcept override;
  [[gnu::cold]] void post_call_done(std::uint64_t key, std::exception_ptr error) noexcept;

  void start() override;
  const boost::asio::any_io_executor& get_executor() const noexcept override { return ex_; }
  connection_figures figures() const override;
  void close() override {
    if (!closed_) conn_->close();
  }

  void go_away() override;

  void on_message(transport::received_message message) override;

  void on_close(const boost::system::error_code& reason) override;

 private:
  void violation(const char* why);

  // Cancels every call, fails every stream with `why` and closes the connection (on_close follows).
  void end_connection(const std::string& why);

  // --- going away ---------------------------------------------------------------------------
  // The client answered our going_away: nothing new follows it on this connection.
  void on_going_away_answer() {
    if (!going_away_sent_) return violation("going_away from a client that was not asked to go");
    client_gone_away_ = true;
    close_if_drained();
  }

  // After the client's answer, the connection closes with its last call or stream.
  void close_if_drained() {
    if (client_gone_away_ && !closed_ && unary_calls_in_flight() == 0 && streams_.empty()) close();
  }

  // --- heartbeats ---------------------------------------------------------------------------
  // The executor's heartbeat_ticker ticks every connection with the same settings from one timer;
  // nothing per message but liveness's flag.
  void heartbeat_tick(clock::time_point instant, clock::time_point ran_at);

  void on_ping(std::uint64_t value);

  // Deferring to the pings of a client it alone serves, an idle connection never wakes while they come.
  void heard_heartbeat(clock::time_point now) {
    heartbeats_.heard(now, *conn_, [this] { return has_work(); });
  }

  bool has_work() const noexcept { return unary_calls_in_flight() > 0 || !streams_.empty(); }
  // The table's calls, and the one being started when its record is not in the table yet.
  std::size_t unary_calls_in_flight() const noexcept { return calls_.size() + (starting_record_ ? 1 : 0); }

  // The client pings faster than min_ping_interval_allowed: tell it why, then close.
  void too_many_pings();

  // Every stream fails UNAVAILABLE (the connection is gone); their handlers are cancelled.
  void fail_streams(const std::string& why);

  // --- streams ------------------------------------------------------------------------------
  void on_stream_open(const frame::view& v);

  void on_stream_frame(const frame::view& v, transport::received_message& message);

  // The handler of stream `it` finished: trailers with its status end the stream.
  void on_stream_done(std::unordered_map<std::uint32_t, std::unique_ptr<active_stream>>::iterator it,
                      std::exception_ptr e);

  // Stream `id` ended and flushed (stream_core::owner): a handler still running is cancelled.
  void stream_ended(std::uint32_t id, status_code code) override;

  // A stream refused before it started: a reset with the status, like a refused call's response.
  void refuse_stream(std::uint32_t id, status_code code, std::string_view message) {
    refuse(id, code, message, frame::kind::reset);
  }

  // By id, not while walking the table: a handler's cancellation slot may finish its call at once,
  // which takes it out of the table.
  void cancel_all_calls();

  static void cancel(active_call& c) {
    if (c.ctx->is_cancelled()) return;
    c.ctx->mark_cancelled();
    c.signal.emit(boost::asio::cancellation_type::terminal);
  }

  // call_deadlines' owner side: the calls' deadlines share one timer; a call's deadline cancels it.
  friend class call_deadlines<std::uint64_t>;
  bool deadline_live(std::uint64_t key, clock::time_point) {
    const auto it = calls_.find(static_cast<std::uint32_t>(key));
    return it != calls_.end() && it->second->serial == key >> 32;
  }
  void deadline_passed(std::uint64_t key) { on_cancel(static_cast<std::uint32_t>(key)); }
  void deadlines_due() { deadlines_.fire(*this); }

  void on_cancel(std::uint32_t id);

  [[gnu::always_inline]] inline void on_request(const frame::view& v, transport::received_message& message);

  // on_request's refusal of an admitted request (its interceptors are told).
  [[gnu::cold]] [[gnu::noinline]] void refuse_admitted_request(const frame::view& v, interception& icpt,
                                                               const method_entry* m, status_code code,
                                                               const std::string& why);

  // The starting call's record into the table, and its deadline under watch: where everything but
  // the handler's own immediate answer finds a call.
  void table_starting_record() {
    if (starting_record_) [[unlikely]]
      table_starting_record_now();
  }
  void table_starting_record_now();

  // Dropped while an exception unwinds out of the start() on the stack: on_request answers with
  // that exception (or INTERNAL, if the handler catches it). Anything else answers INTERNAL now.
  void call_dropped(std::uint64_t key, bool unwinding) noexcept override;

  void on_call_done(std::uint64_t key,
                    std::exception_ptr&& e);  // (&&: one exception_ptr less to make and destroy)

  // The status a handler's exception answers with.
  static void set_status_from(server_context& ctx, const std::exception_ptr& e);

  // Sends call `id`'s reply when there is send room; else the call (still counted against
  // max_in_flight_per_connection) waits for room with the connection's async_reserve, within
  // max_waiting_reply_bytes of waiting replies (or alone). A reply beyond that gives way: the call
  // is answered RESOURCE_EXHAUSTED (a refusal, which holds no reply) and its memory let go.
  [[gnu::always_inline]] inline void reply(std::uint32_t id, active_call& c);

  // The usual reply, sent at once: OK, no metadata, send room now. False when
  // any of that does not hold, nothing sent: response_for and reply() then handle every case.
  [[gnu::always_inline]] inline bool send_plain_reply(std::uint32_t id, active_call& c);

  // The response to finished call `c`: its reply, or its status (also when the reply cannot go),
  // with its metadata. One too large for the connection is replaced by RESOURCE_EXHAUSTED.
  response_frame response_for(std::uint32_t id, active_call& c);

  void forget(std::uint32_t id);

  static constexpr std::size_t kSpareActiveCalls = 64;  // call records kept for reuse

  // Call objects of finished calls serve the next calls of the same method (their messages keep
  // their memory): no allocation for them in steady state. Up to kSpareCallsInRecords kept records
  // keep theirs (a call of the same method then takes none from anywhere; the last kept record is
  // the next one out); beyond them, kSpareCallsPerMethod are kept per method.
  static constexpr std::size_t kSpareCallsInRecords = 4;
  static constexpr std::size_t kSpareCallsPerMethod = 4;

  // A finished call's record (its context finished; reset but for its call object and method),
  // kept for the next call. Also a record that never started a call (its context as it was).
  void recycle(std::unique_ptr<active_call> c);

  // Gives record `c` a call object for method `m` (its own one goes to its method's spares).
  // False when the service has none for it.
  bool equip(active_call& c, const method_entry& m);

  void keep_call(const method_entry& m, std::unique_ptr<server_call> call);

  // Sends a response that has no call record behind it. would_block when there is no room now
  // (nothing sent); other errors mean the connection is ending (on_close follows).
  boost::system::error_code respond(std::uint32_t id, status_code code, std::string_view message,
                                    frame::kind kind = frame::kind::response);

  // What every request and stream_open goes through first, in this one place: its metadata (and,
  // for a stream, the client's window), limits first: nothing of it is parsed or allocated before
  // they are checked; then its method (`m`, null for an unknown id: the caller answers
  // UNIMPLEMENTED) and server_options::check_call. False when the call was refused (a response, or
  // a reset for a stream) or the connection closed as a protocol violation.
  [[gnu::always_inline]] bool admit_request(const frame::view& v, metadata& md, stream_window_size* window,
                                            const method_entry*& m, interception& icpt) {
    const std::uint32_t id = v.header.call_id;
    const auto refusal = window != nullptr ? frame::kind::reset : frame::kind::response;
    if (v.extras.size() > opts_.max_metadata_bytes) {
      refuse_over_limit(
          id, "request metadata larger than " + std::to_string(opts_.max_metadata_bytes) + " bytes", refusal);
      return false;
    }
    if (!v.extras.empty()) {  // most calls carry no metadata
      const auto entries = extras::count_fields(v.extras);
      const std::size_t allowed = opts_.max_metadata_entries + (window != nullptr ? 1 : 0);  // + the window
      if (entries && *entries > allowed) {
        refuse_over_limit(
            id, "request metadata has more than " + std::to_string(opts_.max_metadata_entries) + " entries",
            refusal);
        return false;
      }
      if (!entries || !extras::decode_request(v.extras, md, window)) {
        violation(window != nullptr ? "stream_open extras do not parse" : "request extras do not parse");
        return false;
      }
    }
    m = find_method(v.header.method_id);
    ++calls_started_;
    // Without metrics or interceptors (the usual case) this branch is all it costs.
    if (metrics_ != nullptr || !chain_.empty()) [[unlikely]]
      return run_interceptors(id, m, md, window != nullptr, icpt);
    return true;
  }

  // The method table's entry for `id` (null: none), through a one-entry cache: a connection's
  // calls mostly repeat a method. The table is read-only while serving and its entries never move.
  const method_entry* find_method(std::uint32_t id) noexcept {
    if (last_method_ == nullptr || last_method_id_ != id) {
      const method_entry* m = server_->methods().find(id);
      if (m == nullptr) return nullptr;
      last_method_ = m;
      last_method_id_ = id;
    }
    return last_method_;
  }

  // A method's dense index for per-method tables; kUnknownMethod for an id no method has.
  static std::size_t slot_of(const method_entry* m) {
    return m != nullptr ? m->slot : call_info::kUnknownMethod;
  }

  static call_info info_of(const method_entry* m, const metadata& md, const peer_info& peer, bool stream) {
    return call_info{m != nullptr ? m->full_name : std::string_view(), md, peer, stream, slot_of(m)};
  }

  // The metrics' count of a call about to start, and the interceptors' on_call_start, which refuse
  // it unless all say OK. icpt.asked counts the metrics as the first of the chain: they are owed
  // the end of every call they counted, after the interceptors (end_interception).
  bool run_interceptors(std::uint32_t id, const method_entry* m, const metadata& md, bool stream,
                        interception& icpt);

  // The interceptors' on_call_end, then the metrics', for a call that ended (no-op when none was
  // asked). Inlined: per call with the metrics on, and out of line its nine arguments cost more
  // than its body.
  [[gnu::always_inline]] void end_interception(std::uint16_t asked, clock::time_point started,
                                               const method_entry* m, const metadata& md, bool stream,
                                               status_code code, std::string_view message,
                                               std::size_t request_bytes, std::size_t response_bytes) {
    if (asked == 0) return;
    const call_outcome outcome{code, message, request_bytes, response_bytes, clock::now() - started};
    const std::uint16_t by_chain = metrics_ != nullptr ? asked - 1 : asked;
    if (by_chain != 0) chain_.end(by_chain, info_of(m, md, peer_info_, stream), outcome);
    if (metrics_ != nullptr) metrics_->call_ended(slot_of(m), outcome);
  }

  // end_interception for unary call `c`, whose interceptors are then told (c.intercepted is 0).
  [[gnu::always_inline]] void end_unary_interception(active_call& c, status_code code,
                                                     std::string_view message, std::size_t response_bytes) {
    end_interception(std::exchange(c.intercepted, 0), c.started, c.method, c.ctx->client_metadata(), false,
                     code, message, c.request_bytes, response_bytes);
  }

  // The limits a request can hit, each logged once per connection.
  enum limit : std::uint8_t {
    metadata_limit = 1,
    request_size_limit = 2,
    in_flight_limit = 4,
    waiting_reply_limit = 8,
  };

  // A request beyond a configured limit: refused RESOURCE_EXHAUSTED; logged once per connection.
  void refuse_over_limit(std::uint32_t id, const std::string& why, frame::kind kind = frame::kind::response) {
    log_limit_once(metadata_limit, why);
    refuse(id, status_code::resource_exhausted, why, kind);
  }

  void log_limit_once(limit which, const std::string& why);

  // Whether a running call or stream has this id (the stream table is hashed only when streams run).
  bool id_in_use(std::uint32_t id) {
    return calls_.contains(id) || (!streams_.empty() && streams_.contains(id));
  }

  // Calls and streams at max_in_flight_per_connection: the next is refused (logged once).
  bool at_in_flight_limit() {
    if (calls_.size() + streams_.size() < opts_.max_in_flight_per_connection) return false;
    log_limit_once(in_flight_limit, in_flight_refusal);
    return true;
  }

  static constexpr const char* in_flight_refusal =
      "too many calls in flight on this connection (server_options::max_in_flight_per_connection)";

  static std::string too_large(const method_entry& m, std::size_t bytes) {
    return "message of " + std::to_string(bytes) + " bytes larger than " + std::string(m.full_name) +
           " accepts (" + std::to_string(m.max_request_bytes) + ")";
  }

  // A refusal (no call record behind it). Without room now it waits its turn like a reply; a peer
  // that lets max_in_flight_per_connection refusals wait on top of its replies does not read its
  // responses, and is cut off.
  void refuse(std::uint32_t id, status_code code, std::string_view message,
              frame::kind kind = frame::kind::response);

  std::shared_ptr<server_connection::owner> server_;
  const server_options& opts_;  // server_->options(), fixed for the server's life (no virtual call)
  std::shared_ptr<transport::connection> conn_;
  boost::asio::any_io_executor ex_;
  const boost::asio::io_context::executor_type* io_ex_;  // ex_'s target when it is an io_context's
  std::shared_ptr<const std::string> peer_;              // shared with every call's server_context
  peer_info peer_info_;                                  // views into *peer_, for check_call
  bool closed_ = false;
  bool going_away_sent_ = false;         // go_away(): the client was told to send nothing new
  bool client_gone_away_ = false;        // and answered: nothing new follows; close once drained
  std::size_t refusals_waiting_ = 0;     // refusals waiting for send room
  std::size_t waiting_reply_bytes_ = 0;  // replies' bytes waiting for send room
  std::uint32_t serial_ = 0;             // last call's serial
  // The call whose start() is on the stack (null outside), its key, and whether its completion
  // was dropped while an exception unwound.
  server_call* starting_call_ = nullptr;
  std::uint64_t starting_key_ = 0;
  std::unique_ptr<active_call> starting_record_;  // its record, until the table takes it (on_request)
  bool starting_dropped_ = false;
  std::uint8_t limits_logged_ = 0;  // the limits (enum limit) already logged
  metadata request_metadata_;       // on_request's, empty outside it
  // What interceptors add to a call's response metadata, moved into its context (kept: its
  // capacity serves the next call).
  metadata initial_metadata_;
  // Running calls, and finished ones whose reply waits for send room; records are reused.
  call_table<active_call> calls_{kSpareActiveCalls};
  std::vector<std::vector<std::unique_ptr<server_call>>> spare_calls_;  // by method_entry::slot
  std::size_t spare_calls_in_records_ = 0;  // kept records holding a call object (recycle)
  std::unordered_map<std::uint32_t, std::unique_ptr<active_stream>> streams_;
  const method_entry* last_method_ = nullptr;  // find_method's cache: the entry of last_method_id_
  std::uint32_t last_method_id_ = 0;
  std::uint32_t highest_id_ = 0;  // highest call or stream id seen (frames above it: never opened)
  // The server's interceptors (immutable once serving): one load per call instead of a virtual call.
  const interceptor_chain<server_interceptor>& chain_;
  call_metrics* const metrics_;  // the server's built-in metrics, or null
  // Figures (connection_figures): plain counters, this connection's thread only.
  const clock::time_point accepted_at_ = clock::now();
  std::uint64_t calls_started_ = 0;
  std::uint64_t pings_sent_ = 0, pongs_received_ = 0, pings_received_ = 0;
  connection_heartbeats heartbeats_;  // ticking while the connection is open
  ping_policer policer_;
  call_deadlines<std::uint64_t> deadlines_{ex_};  // of the calls in calls_ that have one (by server_done key)
};

}  // namespace rdmarpc::server_connection_detail
