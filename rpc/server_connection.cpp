#include "rpc/server_connection.hpp"

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
#include "rpc/stream_core.hpp"

namespace rdmarpc {
namespace {

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
  void call_done(std::uint64_t key, std::exception_ptr error) noexcept override {
    if (io_ex_ != nullptr && io_ex_->running_in_this_thread()) return on_call_done(key, std::move(error));
    post_call_done(key, std::move(error));
  }
  // Invoked lent: inside the handler's start(), which on_request calls on our executor's thread.
  void call_done_lent(std::uint64_t key, std::exception_ptr error) noexcept override {
    if (io_ex_ == nullptr) [[unlikely]]
      return post_call_done(key, std::move(error));  // (an executor whose thread we cannot tell)
    assert(io_ex_->running_in_this_thread() && "a lent server_done is invoked on its handler's thread");
    on_call_done(key, std::move(error));
  }
  [[gnu::cold]] void post_call_done(std::uint64_t key, std::exception_ptr error) noexcept {
    boost::asio::post(ex_, [self = shared_from_this(), key, error = std::move(error)]() mutable {
      self->on_call_done(key, std::move(error));
    });
  }

  void start() override {
    conn_->start(shared_from_this());
    // Half a period after the clients' grid: a client and its server then never decide to ping at
    // the same instant.
    heartbeats_.start(ex_, heartbeats_.tick_period() / 2,
                      [weak = weak_from_this()](clock::time_point instant, clock::time_point ran_at) {
                        if (auto self = weak.lock()) self->heartbeat_tick(instant, ran_at);
                      });
  }
  const boost::asio::any_io_executor& get_executor() const noexcept override { return ex_; }
  connection_figures figures() const override {
    connection_figures f;
    f.peer = *peer_;
    f.kind = peer_info_.transport;
    f.age = clock::now() - accepted_at_;
    f.calls_started = calls_started_;
    f.calls_in_flight = unary_calls_in_flight() + streams_.size();
    f.pings_sent = pings_sent_;
    f.pongs_received = pongs_received_;
    f.pings_received = pings_received_;
    f.counters = conn_->stats();
    return f;
  }
  void close() override {
    if (!closed_) conn_->close();
  }

  void go_away() override {
    if (closed_ || going_away_sent_) return;
    going_away_sent_ = true;
    frame::header h;
    h.kind = frame::kind::going_away;
    const auto head = frame::encode_full_header(h);
    if (conn_->send_copy(boost::asio::buffer(head)) != boost::asio::error::would_block) return;
    // Behind what waits for room already; the server's grace bounds the wait.
    conn_->async_reserve(
        frame::kHeaderSize,
        [self = shared_from_this(), head](boost::system::error_code ec, transport::send_reservation r) {
          if (ec || self->closed_) return;
          std::memcpy(r.data().data(), head.data(), head.size());
          r.commit(head.size());
        });
  }

  void on_message(transport::received_message message) override {
    if (closed_) return;
    table_starting_record();  // (only set here when a handler runs the io_context inside start())
    frame::decode_error err{};
    const auto v = frame::decode(message.bytes(), err);
    if (err != frame::decode_error::none) return violation(frame::to_string(err));
    heartbeats_.on_frame(v.header.kind);  // flags: heartbeats cost nothing per message
    switch (v.header.kind) {
      case frame::kind::ping: heartbeats_.share_with(v); return on_ping(v.header.timeout_us);
      case frame::kind::pong:
        ++pongs_received_;
        server_->heartbeats().pongs_received.fetch_add(1, std::memory_order_relaxed);
        heartbeats_.share_with(v);
        heartbeats_.on_pong(v);
        return heard_heartbeat(clock::now());
      case frame::kind::request: return on_request(v, message);
      case frame::kind::going_away: return on_going_away_answer();
      case frame::kind::cancel: return on_cancel(v.header.call_id);
      case frame::kind::response: return violation("response frame sent to a server");
      case frame::kind::stream_open: return on_stream_open(v);
      case frame::kind::stream_message:
      case frame::kind::half_close:
      case frame::kind::trailers:
      case frame::kind::reset:
      case frame::kind::window_update:
      case frame::kind::stream_headers: return on_stream_frame(v, message);
    }
    violation("unknown frame kind");
  }

  void on_close(const boost::system::error_code& reason) override {
    table_starting_record();
    // A connection this side ended for a fault was logged (at warning, with why) by end_connection's
    // caller; any other end is logged here, once.
    if (!closed_)
      rdmarpc::logger()->info("rdmarpc server: connection from {} closed: {}", *peer_, reason.message());
    closed_ = true;
    heartbeats_.stop();
    cancel_all_calls();
    deadlines_.stop();
    fail_streams("connection ended: " + reason.message());
    server_->connection_ended(this);
    // conn_ is kept: calls still running hold us, and send() on a closed connection is harmless.
  }

 private:
  void violation(const char* why) {
    rdmarpc::logger()->warn("rdmarpc server: closing connection from {}: {}", *peer_, why);
    end_connection(std::string("connection closed: protocol error: ") + why);
  }

  // Cancels every call, fails every stream with `why` and closes the connection (on_close follows).
  void end_connection(const std::string& why) {
    closed_ = true;
    heartbeats_.stop();
    cancel_all_calls();
    deadlines_.stop();
    fail_streams(why);
    conn_->close();
  }

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
  void heartbeat_tick(clock::time_point instant, clock::time_point ran_at) {
    if (closed_) return;
    switch (heartbeats_.tick(instant, ran_at, has_work(), *conn_)) {
      case connection_heartbeats::tick_result::none: return;
      case connection_heartbeats::tick_result::ping_sent:
        ++pings_sent_;
        server_->heartbeats().pings_sent.fetch_add(1, std::memory_order_relaxed);
        return;
      case connection_heartbeats::tick_result::peer_dead: {
        server_->heartbeats().timeouts.fetch_add(1, std::memory_order_relaxed);
        const auto reason = make_error_code(transport::errc::connection_lost);
        rdmarpc::logger()->warn(
            "rdmarpc server: no answer from {} to a heartbeat within {} ms: {}", *peer_,
            std::chrono::duration_cast<std::chrono::milliseconds>(opts_.heartbeat_timeout).count(),
            reason.message());
        return end_connection("connection lost: " + reason.message() + " (no heartbeat answer)");
      }
    }
  }

  void on_ping(std::uint64_t value) {
    ++pings_received_;
    server_->heartbeats().pings_received.fetch_add(1, std::memory_order_relaxed);
    const auto now = clock::now();
    if (policer_.on_ping(now)) return too_many_pings();
    heartbeats_.on_peer_ping();  // the client runs heartbeats: ours are its pongs while it does
    (void)heartbeats_.send(frame::kind::pong, value,
                           *conn_);  // no room: whatever fills the queue is traffic too
    heard_heartbeat(now);
  }

  // Deferring to the pings of a client it alone serves, an idle connection never wakes while they come.
  void heard_heartbeat(clock::time_point now) {
    heartbeats_.heard(now, *conn_, [this] { return has_work(); });
  }

  bool has_work() const noexcept { return unary_calls_in_flight() > 0 || !streams_.empty(); }
  // The table's calls, and the one being started when its record is not in the table yet.
  std::size_t unary_calls_in_flight() const noexcept { return calls_.size() + (starting_record_ ? 1 : 0); }

  // The client pings faster than min_ping_interval_allowed: tell it why, then close.
  void too_many_pings() {
    server_->heartbeats().too_many_pings.fetch_add(1, std::memory_order_relaxed);
    rdmarpc::logger()->warn(
        "rdmarpc server: closing connection from {}: too_many_pings (more than {} pings sooner than {} ms "
        "apart)",
        *peer_, opts_.max_ping_strikes,
        std::chrono::duration_cast<std::chrono::milliseconds>(opts_.min_ping_interval_allowed).count());
    // A reset for call 0 is about the connection; the close flushes it first.
    (void)respond(0, status_code::resource_exhausted, "too_many_pings", frame::kind::reset);
    end_connection("connection closed: too_many_pings");
  }

  // Every stream fails UNAVAILABLE (the connection is gone); their handlers are cancelled.
  void fail_streams(const std::string& why) {
    std::vector<std::shared_ptr<stream_core>> streams;
    for (auto& [id, s] : streams_) streams.push_back(s->stream);
    for (auto& core : streams) core->fail(status_code::unavailable, why);
  }

  // --- streams ------------------------------------------------------------------------------
  void on_stream_open(const frame::view& v) {
    const std::uint32_t id = v.header.call_id;
    if (id_in_use(id)) return violation("duplicate call id");
    highest_id_ = std::max(highest_id_, id);
    metadata md;
    stream_window_size client_window = kDefaultStreamWindow;
    const method_entry* m = nullptr;
    interception icpt;
    if (!admit_request(v, md, &client_window, m, icpt)) return;
    // A refusal from here on is an end the interceptors are told of.
    const auto refuse_admitted = [&](status_code code, const std::string& why) {
      refuse_stream(id, code, why);
      icpt.drop_initial();
      end_interception(icpt.asked, icpt.started, m, md, true, code, why, 0, 0);
    };
    if (client_gone_away_) return refuse_admitted(status_code::unavailable, "server shutting down");
    if (at_in_flight_limit()) return refuse_admitted(status_code::resource_exhausted, in_flight_refusal);
    if (m == nullptr)
      return refuse_admitted(status_code::unimplemented,
                             "unknown method id " + std::to_string(v.header.method_id));
    std::shared_ptr<server_stream_call> call = m->svc->new_stream_call(m->index);
    if (!call)
      return refuse_admitted(status_code::unimplemented,
                             std::string(m->full_name) + " is not a streaming method");
    const auto deadline = v.header.has_timeout()
                              ? clock::now() + std::chrono::microseconds(v.header.timeout_us)
                              : clock::time_point::max();
    auto rec = std::make_unique<active_stream>(ex_, m->full_name, peer_, deadline, std::move(md));
    icpt.add_initial_to(rec->ctx);
    rec->method = m;
    rec->intercepted = icpt.asked;
    rec->started = icpt.started;
    stream_core::settings s;
    s.side = stream_state::side::server;
    s.id = id;
    const auto own = normalised(opts_.stream_window);
    s.receive_window.bytes = std::max(own.bytes, kInitialStreamWindow.bytes);
    s.receive_window.messages = std::max(own.messages, kInitialStreamWindow.messages);
    s.send_window = client_window;
    rec->stream = std::make_shared<stream_core>(ex_, weak_from_this(), s);
    rec->call = call;
    rec->serial = ++serial_;
    active_stream& st = *rec;
    streams_.emplace(id, std::move(rec));
    server_->call_started();
    auto core = st.stream;
    core->accept(&st.ctx, deadline);
    core->attach(conn_);
    const std::uint64_t key = std::uint64_t{st.serial} << 32 | id;
    try {
      call->start(st.ctx, core, server_done(server_done::lent, *this, key), st.signal.slot());
    } catch (...) {
      on_call_done(key, std::current_exception());
    }
  }

  void on_stream_frame(const frame::view& v, transport::received_message& message) {
    auto it = streams_.find(v.header.call_id);
    if (it == streams_.end()) {
      if (v.header.call_id > highest_id_) violation("stream frame for a stream never opened");
      return;  // a stream that ended here (or was refused): the frame crossed its end
    }
    auto core = it->second->stream;  // the stream may end (and its record go) inside on_frame
    const method_entry& m = *it->second->method;
    if (v.header.kind == frame::kind::stream_message && v.payload.size() > m.max_request_bytes &&
        !core->ended()) [[unlikely]] {
      const std::string why = too_large(m, v.payload.size());
      log_limit_once(request_size_limit, why);
      return core->reset(status_code::resource_exhausted, why);  // unparsed; the handler is cancelled
    }
    core->on_frame(v, message);
  }

  // The handler of stream `it` finished: trailers with its status end the stream.
  void on_stream_done(std::unordered_map<std::uint32_t, std::unique_ptr<active_stream>>::iterator it,
                      std::exception_ptr e) {
    active_stream& st = *it->second;
    if (st.done) return;
    st.done = true;
    server_->call_finished();
    if (st.ended) {
      streams_.erase(it);
      if (client_gone_away_) close_if_drained();
      return;
    }
    if (e) set_status_from(st.ctx, e);
    auto core = st.stream;
    core->finish_server(st.ctx.status(), st.ctx.status_message());  // may end the record
  }

  // Stream `id` ended and flushed (stream_core::owner): a handler still running is cancelled.
  void stream_ended(std::uint32_t id, status_code code) override {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    active_stream& st = *it->second;
    st.ended = true;
    if (st.intercepted != 0) {
      const auto bytes = st.stream->payload_bytes();
      end_interception(
          std::exchange(st.intercepted, 0), st.started, st.method, st.ctx.client_metadata(), true, code,
          code == status_code::ok ? std::string_view() : std::string_view(st.stream->final_message()),
          bytes.received, bytes.sent);
    }
    if (st.done) {
      streams_.erase(it);
      if (client_gone_away_) close_if_drained();
      return;
    }
    (void)code;
    if (!st.ctx.is_cancelled()) {
      st.ctx.mark_cancelled();
      st.signal.emit(boost::asio::cancellation_type::terminal);
    }
  }

  // A stream refused before it started: a reset with the status, like a refused call's response.
  void refuse_stream(std::uint32_t id, status_code code, std::string_view message) {
    refuse(id, code, message, frame::kind::reset);
  }

  // By id, not while walking the table: a handler's cancellation slot may finish its call at once,
  // which takes it out of the table.
  void cancel_all_calls() {
    table_starting_record();
    std::vector<std::uint32_t> ids;
    ids.reserve(calls_.size());
    for (const auto& [id, c] : calls_) ids.push_back(id);
    for (const auto id : ids)
      if (const auto it = calls_.find(id); it != calls_.end()) cancel(*it->second);
  }

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

  void on_cancel(std::uint32_t id) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    cancel(*it->second);
    // Found again: a handler's cancellation slot may have finished the call at once (forgotten,
    // and the table's slots moved).
    it = calls_.find(id);
    if (it == calls_.end() || !it->second->done) return;
    // Its reply was waiting for room: nobody reads it now, and the wait must not hold the queue.
    if (auto wait = it->second->reply_wait) wait->emit(boost::asio::cancellation_type::terminal);
    forget(id);
  }

  [[gnu::always_inline]] void on_request(const frame::view& v, transport::received_message& message) {
    const std::uint32_t id = v.header.call_id;
    if (id_in_use(id)) return violation("duplicate call id");
    highest_id_ = std::max(highest_id_, id);
    // Decoded into a member that is empty between requests, then swapped into the call's context:
    // no vector made and destroyed per call. Emptied on every way out (it may hold credentials).
    metadata& md = request_metadata_;
    const struct empty_on_exit {
      metadata& m;
      [[gnu::always_inline]] ~empty_on_exit() {
        if (!m.empty()) [[unlikely]]
          m.clear();  // (clear() itself is out of line)
      }
    } scratch{md};
    const method_entry* m = nullptr;
    interception icpt;
    if (!admit_request(v, md, nullptr, m, icpt)) return;
    const std::size_t request_bytes = v.payload.size();
    // A refusal from here on is an end the interceptors are told of (refuse_admitted_request; not a
    // lambda, whose captures would be stored for every call, refused or not).
    if (client_gone_away_)
      return refuse_admitted_request(v, icpt, m, status_code::unavailable, "server shutting down");
    if (at_in_flight_limit())
      return refuse_admitted_request(v, icpt, m, status_code::resource_exhausted, in_flight_refusal);
    if (m == nullptr)
      return refuse_admitted_request(v, icpt, m, status_code::unimplemented,
                                     "unknown method id " + std::to_string(v.header.method_id));
    if (request_bytes > m->max_request_bytes) [[unlikely]] {
      const std::string why = too_large(*m, request_bytes);
      log_limit_once(request_size_limit, why);
      return refuse_admitted_request(v, icpt, m, status_code::resource_exhausted, why);
    }
    auto c = calls_.new_record();
    spare_calls_in_records_ -= c->call != nullptr;
    if (c->method != m || !c->call) [[unlikely]] {  // (a kept record usually holds this method's call)
      if (!equip(*c, *m)) {
        recycle(std::move(c));
        return refuse_admitted_request(v, icpt, m, status_code::unimplemented, "method index out of range");
      }
    }
    // Parsed straight from the receive buffer, which goes back to the transport at once.
    const bool parsed = c->call->parse_request(v.payload, m->request_may_lack_required);
    message.release();
    if (!parsed) {
      refuse_admitted_request(v, icpt, m, status_code::invalid_argument,
                              "cannot parse " + c->call->request_type());
      return recycle(std::move(c));
    }
    const auto deadline = v.header.has_timeout()
                              ? clock::now() + std::chrono::microseconds(v.header.timeout_us)
                              : clock::time_point::max();
    if (c->ctx) {
      detail::server_context_reuse::reuse(*c->ctx, m->full_name, deadline, md);
    } else {
      c->ctx.emplace(ex_, m->full_name, peer_, deadline, std::move(md));
    }
    icpt.add_initial_to(*c->ctx);
    c->intercepted = icpt.asked;
    c->started = icpt.started;
    c->request_bytes = request_bytes;
    active_call& call = *c;
    calls_.prepare_insert();  // the insert after start() must not fail: the handler may be running
    server_->call_started();
    call.serial = ++serial_;
    const std::uint64_t key = std::uint64_t{call.serial} << 32 | id;
    // The record enters the table (and its deadline the watch) only if the handler is still running
    // when start() returns: one that answers at once (found through starting_record_) costs no
    // insert, lookup or removal. Nothing else looks the call up meanwhile: frames, timers and
    // completions from other threads all wait for start() to return. (Unless the handler runs the
    // io_context inside start(), which it should not: then whatever arrives first, a frame, the
    // connection's end or a reply's send room, tables the record.)
    // The handler may finish before start() returns; its record (call object and context) then
    // stays parked here until start() has returned (see forget), also inside another call's
    // start() (a handler that runs the io_context).
    std::unique_ptr<active_call> parked;
    struct park_while_starting {
      active_call* c;
      [[gnu::always_inline]] park_while_starting(active_call& call, std::unique_ptr<active_call>& slot)
          : c(&call) {
        c->park_slot = &slot;
      }
      // Before `parked` goes, when an exception leaves: `c` is alive then, parked or not.
      [[gnu::always_inline]] ~park_while_starting() {
        if (c != nullptr) c->park_slot = nullptr;
      }
      [[gnu::always_inline]] void done() { std::exchange(c, nullptr)->park_slot = nullptr; }
    } parking{call, parked};
    const auto outer_call = starting_call_;
    const auto outer_key = starting_key_;
    const bool outer_dropped = starting_dropped_;
    starting_record_ = std::move(c);
    starting_call_ = call.call.get();
    starting_key_ = key;
    starting_dropped_ = false;
    try {
      call.call->start(*call.ctx, server_done(server_done::lent, *this, key), call.signal.slot());
    } catch (...) {
      starting_dropped_ = false;
      on_call_done(key, std::current_exception());  // ignored when it had finished already
    }
    if (starting_dropped_) {
      // Its completion was dropped while an exception unwound inside the handler, which caught it.
      on_call_done(
          key, std::make_exception_ptr(status_error(
                   status_code::internal, "the handler dropped its completion while an exception unwound")));
    }
    table_starting_record();  // still running (or its reply waits for send room)
    starting_call_ = outer_call;
    starting_key_ = outer_key;
    starting_dropped_ = outer_dropped;
    parking.done();
    if (parked) [[likely]]
      recycle(std::move(parked));
  }

  // on_request's refusal of an admitted request (its interceptors are told).
  [[gnu::cold]] [[gnu::noinline]] void refuse_admitted_request(const frame::view& v, interception& icpt,
                                                               const method_entry* m, status_code code,
                                                               const std::string& why) {
    refuse(v.header.call_id, code, why);
    icpt.drop_initial();
    end_interception(icpt.asked, icpt.started, m, request_metadata_, false, code, why, v.payload.size(), 0);
  }

  // The starting call's record into the table, and its deadline under watch: where everything but
  // the handler's own immediate answer finds a call.
  void table_starting_record() {
    if (starting_record_) [[unlikely]]
      table_starting_record_now();
  }
  void table_starting_record_now() {
    const clock::time_point deadline = starting_record_->ctx->deadline();
    calls_.insert(static_cast<std::uint32_t>(starting_key_), std::move(starting_record_));
    if (deadline != clock::time_point::max()) deadlines_.watch(*this, starting_key_, deadline, calls_.size());
  }

  // Dropped while an exception unwinds out of the start() on the stack: on_request answers with
  // that exception (or INTERNAL, if the handler catches it). Anything else answers INTERNAL now.
  void call_dropped(std::uint64_t key, bool unwinding) noexcept override {
    if (unwinding && starting_call_ != nullptr && key == starting_key_ && io_ex_ != nullptr &&
        io_ex_->running_in_this_thread()) {
      starting_dropped_ = true;
      return;
    }
    server_done::target::call_dropped(key, unwinding);
  }

  void on_call_done(std::uint64_t key,
                    std::exception_ptr&& e) {  // (&&: one exception_ptr less to make and destroy)
    const auto id = static_cast<std::uint32_t>(key);
    if (!streams_.empty()) {  // a hash of the id only when streams run
      if (auto st = streams_.find(id); st != streams_.end() && st->second->serial == key >> 32) {
        return on_stream_done(st, std::move(e));
      }
    }
    active_call* record = starting_record_ && key == starting_key_ ? starting_record_.get() : nullptr;
    if (record == nullptr) {
      auto it = calls_.find(id);
      if (it != calls_.end() && it->second->serial == key >> 32) record = it->second.get();
    }
    if (record == nullptr || record->done) {
      rdmarpc::logger()->debug("rdmarpc server: call {} finished twice (ignored)", id);
      return;
    }
    active_call& c = *record;
    server_->call_finished();
    c.done = true;
    if (c.ctx->is_cancelled()) {
      // The client gave up (or is gone): nobody reads a reply.
      if (c.intercepted != 0) {
        const bool expired = c.ctx->deadline() <= clock::now();
        end_unary_interception(c, expired ? status_code::deadline_exceeded : status_code::cancelled,
                               expired ? "deadline exceeded" : "cancelled", 0);
      }
      return forget(id);
    }
    if (e) set_status_from(*c.ctx, e);
    reply(id, c);
  }

  // The status a handler's exception answers with.
  static void set_status_from(server_context& ctx, const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const status_error& se) {
      ctx.set_status(se.code(), se.message());
    } catch (const std::exception& ex) {
      ctx.set_status(status_code::internal, std::string("handler threw: ") + ex.what());
    } catch (...) {
      ctx.set_status(status_code::internal, "handler threw a non-standard exception");
    }
  }

  // Sends call `id`'s reply when there is send room; else the call (still counted against
  // max_in_flight_per_connection) waits for room with the connection's async_reserve, within
  // max_waiting_reply_bytes of waiting replies (or alone). A reply beyond that gives way: the call
  // is answered RESOURCE_EXHAUSTED (a refusal, which holds no reply) and its memory let go.
  void reply(std::uint32_t id, active_call& c) {
    if (send_plain_reply(id, c)) return forget(id);
    auto f = response_for(id, c);
    boost::system::error_code ec;
    transport::send_reservation r =
        closed_ ? transport::send_reservation() : conn_->try_reserve(f.size(), ec);
    const bool waits =
        !closed_ && ec && ec == boost::asio::error::would_block;  // (error_code's == is out of line)
    const bool gives_way =
        waits && waiting_reply_bytes_ != 0 && waiting_reply_bytes_ + f.size() > opts_.max_waiting_reply_bytes;
    if (c.intercepted != 0) {
      const status_code sent = gives_way ? status_code::resource_exhausted : f.h.status;
      end_unary_interception(c, sent, sent == c.ctx->status() ? c.ctx->status_message() : std::string_view(),
                             gives_way ? 0 : f.reply_size);
    }
    if (!waits) {
      if (!closed_ && !ec) f.write(std::move(r));
      return forget(id);
    }
    if (gives_way) {
      const std::size_t reply_bytes = f.size();
      forget(id);
      const std::string why = "reply of " + std::to_string(reply_bytes) +
                              " bytes cannot wait for send room: " + std::to_string(waiting_reply_bytes_) +
                              " bytes of replies wait already (server_options::max_waiting_reply_bytes)";
      log_limit_once(waiting_reply_limit, why);
      return refuse(id, status_code::resource_exhausted, why);
    }
    const std::size_t size = f.size();
    waiting_reply_bytes_ += size;
    c.reply_wait = std::make_shared<boost::asio::cancellation_signal>();
    conn_->async_reserve(
        size, boost::asio::bind_cancellation_slot(
                  c.reply_wait->slot(), [self = shared_from_this(), id, size, wait = c.reply_wait](
                                            boost::system::error_code ec, transport::send_reservation r) {
                    self->waiting_reply_bytes_ -= size;
                    self->table_starting_record();  // (a handler running the io_context in start())
                    auto it = self->calls_.find(id);
                    if (it == self->calls_.end() || it->second->reply_wait != wait) return;  // cancelled
                    if (!ec && !self->closed_) {
                      const auto f = self->response_for(id, *it->second);
                      if (f.size() <= r.size()) f.write(std::move(r));
                    }
                    self->forget(id);
                  }));
  }

  // The usual reply, sent at once: OK, no metadata, send room now. False when
  // any of that does not hold, nothing sent: response_for and reply() then handle every case.
  bool send_plain_reply(std::uint32_t id, active_call& c) {
    const server_context& ctx = *c.ctx;
    if (closed_ || ctx.status() != status_code::ok || !ctx.initial_metadata().empty() ||
        !ctx.trailing_metadata().empty()) {
      return false;
    }
    const google::protobuf::MessageLite& reply = c.call->reply();
    if (c.method->reply_may_lack_required && !reply.IsInitialized()) return false;
    const std::size_t size = reply.ByteSizeLong();
    if (size > std::numeric_limits<std::uint32_t>::max()) return false;
    frame::header h;
    h.kind = frame::kind::response;
    h.call_id = id;
    const std::size_t head = frame::header_size(h);
    boost::system::error_code ec;
    auto r = conn_->try_reserve(head + size, ec);
    if (ec) [[unlikely]] {
      // No room now (reply() waits) or too large (reply() answers RESOURCE_EXHAUSTED): reply() goes
      // on. Refused for good (the connection is ending, or has no memory for it): reply() drops the
      // reply too, so it is not asked to try again, unless it must tell metrics and interceptors.
      return c.intercepted == 0 &&
             !(ec == boost::asio::error::would_block || ec == transport::errc::message_too_large);
    }
    if (c.intercepted != 0) {  // metrics, interceptors: told before the reply goes, as reply() does
      end_unary_interception(c, status_code::ok, ctx.status_message(), size);
    }
    frame::encode_header(h, r.data());
    reply.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(r.data().data() + head));
    r.commit();
    return true;
  }

  // The response to finished call `c`: its reply, or its status (also when the reply cannot go),
  // with its metadata. One too large for the connection is replaced by RESOURCE_EXHAUSTED.
  response_frame response_for(std::uint32_t id, active_call& c) {
    const server_context& ctx = *c.ctx;
    const google::protobuf::MessageLite& reply = c.call->reply();
    auto f = ctx.status() != status_code::ok
                 ? response_frame(id, ctx.status(), ctx.status_message(), nullptr, &ctx)
             : c.method->reply_may_lack_required && !reply.IsInitialized()
                 ? response_frame(id, status_code::internal,
                                  "cannot serialize the reply of " + std::string(c.method->full_name),
                                  nullptr, &ctx)
                 : response_frame(id, status_code::ok, {}, &reply, &ctx);
    if (f.reply_size > std::numeric_limits<std::uint32_t>::max() || f.size() > conn_->max_message_size()) {
      f = response_frame(id, status_code::resource_exhausted,
                         "response larger than the connection's maximum message size", nullptr);
    }
    return f;  // one named return: built in place
  }

  void forget(std::uint32_t id) {
    std::unique_ptr<active_call> c;
    if (starting_record_ && static_cast<std::uint32_t>(starting_key_) == id) {
      c = std::move(starting_record_);
    } else {
      auto it = calls_.find(id);
      if (it == calls_.end()) return;
      c = calls_.extract(it);
    }
    if (c->ctx) detail::server_context_reuse::finish(*c->ctx);  // emptied (and no longer written)
    c->done = false;
    c->reply_wait.reset();
    c->intercepted = 0;
    if (c->park_slot != nullptr) {
      auto* slot = c->park_slot;  // its start() is still on the stack: on_request recycles it
      *slot = std::move(c);
    } else {
      recycle(std::move(c));
    }
    if (client_gone_away_) close_if_drained();
  }

  static constexpr std::size_t kSpareActiveCalls = 64;  // call records kept for reuse

  // Call objects of finished calls serve the next calls of the same method (their messages keep
  // their memory): no allocation for them in steady state. Up to kSpareCallsInRecords kept records
  // keep theirs (a call of the same method then takes none from anywhere; the last kept record is
  // the next one out); beyond them, kSpareCallsPerMethod are kept per method.
  static constexpr std::size_t kSpareCallsInRecords = 4;
  static constexpr std::size_t kSpareCallsPerMethod = 4;

  // A finished call's record (its context finished; reset but for its call object and method),
  // kept for the next call. Also a record that never started a call (its context as it was).
  void recycle(std::unique_ptr<active_call> c) {
    bool holds_call = false;
    if (c->call) {
      if (spare_calls_in_records_ < kSpareCallsInRecords) [[likely]] {
        c->call->clear();
        holds_call = true;
      } else {
        keep_call(*c->method, std::move(c->call));
      }
    }
    if (calls_.keep(std::move(c))) spare_calls_in_records_ += holds_call;
  }

  // Gives record `c` a call object for method `m` (its own one goes to its method's spares).
  // False when the service has none for it.
  bool equip(active_call& c, const method_entry& m) {
    if (c.call) keep_call(*c.method, std::move(c.call));
    if (m.slot < spare_calls_.size() && !spare_calls_[m.slot].empty()) {
      c.call = std::move(spare_calls_[m.slot].back());
      spare_calls_[m.slot].pop_back();
    } else {
      c.call = m.svc->new_call(m.index);
    }
    c.method = &m;
    return c.call != nullptr;
  }

  void keep_call(const method_entry& m, std::unique_ptr<server_call> call) {
    if (spare_calls_.size() <= m.slot) spare_calls_.resize(server_->methods().size());
    if (m.slot >= spare_calls_.size() || spare_calls_[m.slot].size() >= kSpareCallsPerMethod) return;
    call->clear();
    spare_calls_[m.slot].push_back(std::move(call));
  }

  // Sends a response that has no call record behind it. would_block when there is no room now
  // (nothing sent); other errors mean the connection is ending (on_close follows).
  boost::system::error_code respond(std::uint32_t id, status_code code, std::string_view message,
                                    frame::kind kind = frame::kind::response) {
    if (closed_) return transport::errc::not_connected;
    const response_frame f(id, code, message, nullptr, nullptr, kind);
    boost::system::error_code ec;
    auto r = conn_->try_reserve(f.size(), ec);
    if (!ec) f.write(std::move(r));
    return ec;
  }

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
                        interception& icpt) {
    icpt.started = clock::now();
    if (metrics_ != nullptr) {
      metrics_->call_started(slot_of(m));
      icpt.asked = 1;
      if (chain_.empty()) return true;  // the metrics alone: no call_info, no verdict
    }
    const call_info info = info_of(m, md, peer_info_, stream);
    std::uint16_t asked = 0;
    initial_metadata_.clear();  // (empty: add_initial_to or drop_initial emptied it)
    icpt.initial = &initial_metadata_;
    const call_verdict verdict = chain_.start(info, initial_metadata_, asked);
    icpt.asked += asked;
    if (verdict.code == status_code::ok) return true;
    // Per call, so at debug: a client without credentials must not flood the log.
    rdmarpc::logger()->debug("rdmarpc server: {} {} from {} refused by an interceptor: {} {}",
                             stream ? "stream" : "call", info.method, *peer_, to_string(verdict.code),
                             verdict.message);
    refuse(id, verdict.code, verdict.message, stream ? frame::kind::reset : frame::kind::response);
    icpt.drop_initial();
    end_interception(icpt.asked, icpt.started, m, md, stream, verdict.code, verdict.message, 0, 0);
    return false;
  }

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

  void log_limit_once(limit which, const std::string& why) {
    if ((limits_logged_ & which) != 0) return;
    limits_logged_ |= which;
    rdmarpc::logger()->warn(
        "rdmarpc server: {}: {} (refused RESOURCE_EXHAUSTED; logged once per connection and limit)", *peer_,
        why);
  }

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
              frame::kind kind = frame::kind::response) {
    if (respond(id, code, message, kind) != boost::asio::error::would_block) return;
    if (refusals_waiting_ >= opts_.max_in_flight_per_connection) {
      return violation("peer does not read its responses");
    }
    ++refusals_waiting_;
    response_frame f(id, code, message, nullptr, nullptr, kind);
    const std::size_t size = f.size();
    conn_->async_reserve(size, [self = shared_from_this(), f = std::move(f)](boost::system::error_code ec,
                                                                             transport::send_reservation r) {
      --self->refusals_waiting_;
      if (!ec && !self->closed_ && f.size() <= r.size()) f.write(std::move(r));
    });
  }

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

}  // namespace

std::shared_ptr<server_connection> server_connection::create(std::shared_ptr<owner> server,
                                                             std::shared_ptr<transport::connection> conn) {
  return std::make_shared<connection_impl>(std::move(server), std::move(conn));
}

}  // namespace rdmarpc
