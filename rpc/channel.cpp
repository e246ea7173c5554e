#include "rpc/channel.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/assert.hpp>
#include <cstring>

#include "rpc/channel_impl.hpp"
#include "rpc/extras.hpp"
#include "rpc/parse_message.hpp"

namespace rdmarpc::channel_detail {

inline void channel_impl::start_unary_call(const method_descriptor& method, client_context* context,
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
  boost::asio::post(
      ex_, [self = shared_from_this(), c = std::move(c)]() mutable { self->submit(std::move(c), nullptr); });
}

inline void channel_impl::on_message(std::size_t e, std::uint64_t generation,
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
    if (!detail::parse_message(into, v.payload, c.method.reply_parser, c.method.reply_may_lack_required)) {
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

inline bool channel_impl::take_response_extras(std::size_t e, const frame::view& v, pending_call* c_ptr,
                                               transport::received_message& message,
                                               std::string& status_message) {
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

inline void channel_impl::intercept(pending_call& c) {
  c.started = clock::now();
  c.added_metadata.clear();
  c.request_bytes = c.response_bytes = 0;
  auto v = chain_.start(client_call_info{c.method, c.context, false}, c.added_metadata, c.intercepted);
  if (v.code != status_code::ok) {
    c.early_status = v.code;
    c.early_message = std::move(v.message);
  }
}

inline void channel_impl::end_interception(pending_call& c, status_code code, std::string_view message) {
  chain_.end(std::exchange(c.intercepted, 0), client_call_info{c.method, c.context, false},
             call_outcome{code, message, c.request_bytes, c.response_bytes, clock::now() - c.started});
}

inline void channel_impl::serialize_into_body(pending_call& c, const google::protobuf::MessageLite& request) {
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

inline void channel_impl::submit(std::unique_ptr<pending_call> c,
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

inline std::size_t channel_impl::queued_frame_size(const pending_call& c) noexcept {
  frame::header h;  // kind request
  if (c.deadline != clock::time_point::max()) h.flags = frame::kFlagHasTimeout;
  h.extras_length = c.extras_length;
  return frame::header_size(h) + c.body.size();
}

inline bool channel_impl::make_request_header(const pending_call& c, std::uint32_t extras_length,
                                              std::uint32_t payload_length, frame::header& h) const {
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

inline bool channel_impl::send_direct(std::size_t e, pending_call& c,
                                      const google::protobuf::MessageLite& request) {
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

void channel_impl::pump() {
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

inline void channel_impl::send_queued(std::size_t e, transport::send_reservation r) {
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

inline void channel_impl::wait_for_room(std::size_t e, std::size_t bytes) {
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

bool channel_impl::deadline_live(std::uint32_t id, clock::time_point deadline) {
  const auto it = calls_.find(id);
  return it != calls_.end() && it->second->deadline == deadline;
}

void channel_impl::expire(std::uint32_t id, status_code code, const char* why) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  const std::size_t e = it->second->sent_on;
  if (e != kNoEndpoint && slots_[e]->conn) send_cancel(e, id);
  finish(id, code, why);
  pump();
}

inline void channel_impl::send_cancel(std::size_t e, std::uint32_t id) {
  frame::header h;
  h.kind = frame::kind::cancel;
  h.call_id = id;
  send_header(e, h);
}

void channel_impl::send_header(std::size_t e, const frame::header& h) {
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

void channel_impl::finish(std::uint32_t id, status_code code, std::string&& message, bool in_queue) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  finish_at(it, code, std::move(message), in_queue);
}

inline void channel_impl::finish_at(call_table<pending_call>::iterator it, status_code code,
                                    std::string&& message, bool in_queue) {
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

void channel_impl::complete(std::unique_ptr<pending_call> c, status_code code, std::string&& message) {
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

inline channel_impl::spare_reply_message* channel_impl::spare_reply(
    const google::protobuf::MessageLite& reply) {
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

inline void channel_impl::keep_call(std::unique_ptr<pending_call> c) {
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

void connection_events::on_message(transport::received_message message) {
  channel_->on_message(endpoint_, generation_, message);
}

void connection_events::on_close(const boost::system::error_code& reason) {
  channel_->on_close(endpoint_, generation_, reason);
  channel_.reset();
}

}  // namespace rdmarpc::channel_detail

namespace rdmarpc {
namespace {

using channel_detail::channel_impl;

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
  for (const auto& ep : *endpoints) transport::check_options(ep, options.transport);
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
