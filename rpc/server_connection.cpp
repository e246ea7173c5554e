// server_connection_impl's unary call path: frames in, a request parsed and its handler
// started, its reply written straight into send memory (server_connection_impl.hpp).
#include "rpc/server_connection_impl.hpp"

namespace rdmarpc::server_connection_detail {

void connection_impl::call_done(std::uint64_t key, std::exception_ptr error) noexcept {
  if (io_ex_ != nullptr && io_ex_->running_in_this_thread()) return on_call_done(key, std::move(error));
  post_call_done(key, std::move(error));
}

void connection_impl::call_done_lent(std::uint64_t key, std::exception_ptr error) noexcept {
  if (io_ex_ == nullptr) [[unlikely]]
    return post_call_done(key, std::move(error));  // (an executor whose thread we cannot tell)
  assert(io_ex_->running_in_this_thread() && "a lent server_done is invoked on its handler's thread");
  on_call_done(key, std::move(error));
}

void connection_impl::post_call_done(std::uint64_t key, std::exception_ptr error) noexcept {
  boost::asio::post(ex_, [self = shared_from_this(), key, error = std::move(error)]() mutable {
    self->on_call_done(key, std::move(error));
  });
}

void connection_impl::on_message(transport::received_message message) {
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

void connection_impl::on_cancel(std::uint32_t id) {
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

inline void connection_impl::on_request(const frame::view& v, transport::received_message& message) {
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
  const bool parsed = c->call->parse_request(v.payload, m->request_parser, m->request_may_lack_required);
  message.release();
  if (!parsed) {
    refuse_admitted_request(v, icpt, m, status_code::invalid_argument,
                            "cannot parse " + c->call->request_type());
    return recycle(std::move(c));
  }
  const auto deadline = v.header.has_timeout() ? clock::now() + std::chrono::microseconds(v.header.timeout_us)
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

void connection_impl::refuse_admitted_request(const frame::view& v, interception& icpt, const method_entry* m,
                                              status_code code, const std::string& why) {
  refuse(v.header.call_id, code, why);
  icpt.drop_initial();
  end_interception(icpt.asked, icpt.started, m, request_metadata_, false, code, why, v.payload.size(), 0);
}

void connection_impl::table_starting_record_now() {
  const clock::time_point deadline = starting_record_->ctx->deadline();
  calls_.insert(static_cast<std::uint32_t>(starting_key_), std::move(starting_record_));
  if (deadline != clock::time_point::max()) deadlines_.watch(*this, starting_key_, deadline, calls_.size());
}

void connection_impl::call_dropped(std::uint64_t key, bool unwinding) noexcept {
  if (unwinding && starting_call_ != nullptr && key == starting_key_ && io_ex_ != nullptr &&
      io_ex_->running_in_this_thread()) {
    starting_dropped_ = true;
    return;
  }
  server_done::target::call_dropped(key, unwinding);
}

void connection_impl::on_call_done(
    std::uint64_t key,
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

void connection_impl::set_status_from(server_context& ctx, const std::exception_ptr& e) {
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

inline void connection_impl::reply(std::uint32_t id, active_call& c) {
  if (send_plain_reply(id, c)) return forget(id);
  auto f = response_for(id, c);
  boost::system::error_code ec;
  transport::send_reservation r = closed_ ? transport::send_reservation() : conn_->try_reserve(f.size(), ec);
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

inline bool connection_impl::send_plain_reply(std::uint32_t id, active_call& c) {
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

response_frame connection_impl::response_for(std::uint32_t id, active_call& c) {
  const server_context& ctx = *c.ctx;
  const google::protobuf::MessageLite& reply = c.call->reply();
  auto f =
      ctx.status() != status_code::ok ? response_frame(id, ctx.status(), ctx.status_message(), nullptr, &ctx)
      : c.method->reply_may_lack_required && !reply.IsInitialized()
          ? response_frame(id, status_code::internal,
                           "cannot serialize the reply of " + std::string(c.method->full_name), nullptr, &ctx)
          : response_frame(id, status_code::ok, {}, &reply, &ctx);
  if (f.reply_size > std::numeric_limits<std::uint32_t>::max() || f.size() > conn_->max_message_size()) {
    f = response_frame(id, status_code::resource_exhausted,
                       "response larger than the connection's maximum message size", nullptr);
  }
  return f;  // one named return: built in place
}

void connection_impl::forget(std::uint32_t id) {
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

void connection_impl::recycle(std::unique_ptr<active_call> c) {
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

bool connection_impl::equip(active_call& c, const method_entry& m) {
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

void connection_impl::keep_call(const method_entry& m, std::unique_ptr<server_call> call) {
  if (spare_calls_.size() <= m.slot) spare_calls_.resize(server_->methods().size());
  if (m.slot >= spare_calls_.size() || spare_calls_[m.slot].size() >= kSpareCallsPerMethod) return;
  call->clear();
  spare_calls_[m.slot].push_back(std::move(call));
}

boost::system::error_code connection_impl::respond(std::uint32_t id, status_code code,
                                                   std::string_view message, frame::kind kind) {
  if (closed_) return transport::errc::not_connected;
  const response_frame f(id, code, message, nullptr, nullptr, kind);
  boost::system::error_code ec;
  auto r = conn_->try_reserve(f.size(), ec);
  if (!ec) f.write(std::move(r));
  return ec;
}

bool connection_impl::run_interceptors(std::uint32_t id, const method_entry* m, const metadata& md,
                                       bool stream, interception& icpt) {
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

void connection_impl::log_limit_once(limit which, const std::string& why) {
  if ((limits_logged_ & which) != 0) return;
  limits_logged_ |= which;
  rdmarpc::logger()->warn(
      "rdmarpc server: {}: {} (refused RESOURCE_EXHAUSTED; logged once per connection and limit)", *peer_,
      why);
}

void connection_impl::refuse(std::uint32_t id, status_code code, std::string_view message, frame::kind kind) {
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

}  // namespace rdmarpc::server_connection_detail

namespace rdmarpc {

std::shared_ptr<server_connection> server_connection::create(std::shared_ptr<owner> server,
                                                             std::shared_ptr<transport::connection> conn) {
  return std::make_shared<server_connection_detail::connection_impl>(std::move(server), std::move(conn));
}

}  // namespace rdmarpc
