#include "rpc/stream_core.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <cstring>
#include <utility>

#include "log/log.hpp"
#include "rpc/extras.hpp"
#include "rpc/parse_message.hpp"

namespace rdmarpc {
namespace {

boost::system::error_code error_of(status_code code) noexcept {
  return code == status_code::ok ? boost::system::error_code{} : make_error_code(code);
}

// Any message in a stream fails with this when the stream has ended locally before it went.
constexpr const char* kNotAllowed = "frame not allowed in this state";

}  // namespace

stream_core::stream_core(boost::asio::any_io_executor ex, std::weak_ptr<owner> owner, const settings& s)
    : ex_(std::move(ex)),
      io_ex_(ex_.target<boost::asio::io_context::executor_type>()),
      owner_(std::move(owner)),
      id_(s.id),
      max_metadata_entries_(s.max_metadata_entries),
      max_metadata_bytes_(s.max_metadata_bytes),
      state_(s.side),
      send_window_(s.send_window),
      receive_window_(s.receive_window) {}

stream_core::~stream_core() = default;

bool stream_core::on_own_thread() const noexcept {
  return io_ex_ != nullptr && io_ex_->running_in_this_thread();
}

template <typename F>
void stream_core::run_here(F&& f) {
  if (on_own_thread()) return std::forward<F>(f)();
  boost::asio::post(ex_, std::forward<F>(f));
}

template <typename F>
void stream_core::delivering(F&& f) {
  struct depth {
    int& n;
    explicit depth(int& count) : n(count) { ++n; }
    ~depth() { --n; }
  };
  try {
    const depth d(delivering_);
    std::forward<F>(f)();
  } catch (...) {
    // What was completed before the failure still completes, posted (e.g. bad_alloc in a frame).
    if (delivering_ == 0) post_ready();
    throw;
  }
  if (delivering_ == 0 && ready_count_ > 0) run_ready();
}

// --- the owner's side ---------------------------------------------------------------------

void stream_core::open(const method_descriptor& method, client_context* context, clock::time_point deadline,
                       std::string first_request, bool has_first_request, const metadata& added_metadata) {
  client_ctx_ = context;
  deadline_ = deadline;
  const stream_window_size window = receive_window_.window();
  // The interceptors' entries after the caller's: extras are a protobuf message, so the two
  // encodings concatenated are one message with both lists.
  const std::string ex =
      extras::encode_request(context != nullptr ? context->request_metadata() : metadata{}, &window) +
      (added_metadata.empty() ? std::string() : extras::encode_request(added_metadata));
  out_frame open;
  open.bytes = encode(frame::kind::stream_open, ex, {}, status_code::ok, method.id);  // timeout: when sent
  open.is_open = true;
  ordered_.push_back(std::move(open));
  if (has_first_request) {
    out_frame m;
    m.payload = first_request.size();
    m.bytes = encode(frame::kind::stream_message, {}, first_request);
    m.message = true;
    ordered_.push_back(std::move(m));
    state_.write_half_close();
    out_frame hc;
    hc.bytes = encode(frame::kind::half_close, {}, {});
    ordered_.push_back(std::move(hc));
  }
}

void stream_core::arm_deadline() {
  if (deadline_ == clock::time_point::max() || deadline_timer_ || ended_) return;
  deadline_timer_.emplace(ex_, deadline_);
  deadline_timer_->async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->delivering([&] { self->on_deadline(); });
  });
}

void stream_core::on_deadline() {
  if (!ended_) return reset(status_code::deadline_exceeded, "deadline exceeded");
  abandon_flush(status_code::deadline_exceeded);  // ended here, still sending: stop
}

// The stream ended here but frames of it still wait (for the peer's window or send room): the
// peer reset it or the deadline passed, so they never go; the peer hears a reset if it may care.
void stream_core::abandon_flush(status_code code) {
  if (ordered_.empty() && control_.empty()) return;
  ordered_.clear();
  control_.clear();
  if (write_h_) complete(write_h_, make_error_code(code));
  if (conn_ && (server_ctx_ != nullptr || open_sent_) && code != status_code::cancelled) {
    out_frame f;
    f.bytes = encode(frame::kind::reset, {}, {}, code);
    control_.push_back(std::move(f));
  }
  pump();
}

void stream_core::release() noexcept {
  {
    const std::lock_guard lock(context_mutex_);
    client_ctx_ = nullptr;
  }
  cancel();
}

void stream_core::accept(const server_context* context, clock::time_point deadline) {
  server_ctx_ = context;
  deadline_ = deadline;
  const stream_window_size w = receive_window_.window();
  out_frame headers;
  headers.bytes = encode(frame::kind::stream_headers, {}, {}, status_code::ok, w.messages, w.bytes);
  ordered_.push_back(std::move(headers));
  arm_deadline();
}

void stream_core::attach(std::shared_ptr<transport::connection> conn) {
  if (ended_) return;
  conn_ = std::move(conn);
  pump();
}

void stream_core::on_frame(const frame::view& v, transport::received_message& message) {
  delivering([&] { handle_frame(v, message); });
}

void stream_core::handle_frame(const frame::view& v, transport::received_message& message) {
  using k = frame::kind;
  stream_state::verdict verdict = stream_state::verdict::violation;
  switch (v.header.kind) {
    case k::stream_message: return on_message(v, message);
    case k::half_close: verdict = state_.on_peer_half_close(); break;
    case k::trailers: verdict = state_.on_peer_trailers(); break;
    case k::reset:
      if (ended_) return abandon_flush(status_code::cancelled);  // our trailers may still wait: drop them
      verdict = state_.on_peer_reset();
      break;
    case k::window_update:
      if (ended_ && ordered_.empty()) return;  // nothing of ours waits for it any more
      if (!send_window_.on_granted({v.header.timeout_us, v.header.method_id})) {
        return reset(status_code::internal, "flow control violation: window grant beyond the window");
      }
      return pump();
    case k::stream_headers:
      if (ended_) return;
      if (headers_received_ || server_ctx_ != nullptr) return reset(status_code::internal, kNotAllowed);
      headers_received_ = true;
      send_window_.on_announced({v.header.timeout_us, v.header.method_id});
      return pump();
    default: return reset(status_code::internal, kNotAllowed);
  }
  if (verdict == stream_state::verdict::ignore) return;
  if (verdict == stream_state::verdict::violation) return reset(status_code::internal, kNotAllowed);
  switch (v.header.kind) {
    case k::half_close:
      // The client's writes are done: a waiting read sees the end once the inbox is empty.
      if (read_h_ && inbox_.empty()) complete(read_h_, boost::asio::error::eof);
      return;
    case k::trailers: {
      ordered_.clear();  // the server finished: nothing more of ours is read
      control_.clear();
      std::string why;
      if (!take_server_metadata(v.extras, &why, false)) {
        return end(status_code::resource_exhausted,
                   "trailers' metadata beyond the channel's limits; status message dropped", false);
      }
      return end(v.header.status, std::move(why), true);
    }
    case k::reset: {
      std::string why;
      if (!v.extras.empty()) {
        if (extras::count_fields(v.extras).value_or(SIZE_MAX) <= max_metadata_entries_ + 1 &&
            v.extras.size() <= max_metadata_bytes_) {
          (void)extras::decode_response(v.extras, why);
        }
      }
      if (why.empty()) why = "stream reset by the peer";
      const status_code code = v.header.status == status_code::ok ? status_code::cancelled : v.header.status;
      ordered_.clear();  // the peer stopped reading: nothing more goes
      control_.clear();
      return end(code, std::move(why), false);
    }
    default: return;
  }
}

void stream_core::on_message(const frame::view& v, transport::received_message& message) {
  const auto verdict = state_.on_peer_message();
  if (verdict == stream_state::verdict::ignore) return;
  if (verdict == stream_state::verdict::violation) return reset(status_code::internal, kNotAllowed);
  if (!receive_window_.on_received(v.payload.size())) {
    return reset(status_code::internal, "flow control violation: message beyond the window");
  }
  payload_bytes_.received += v.payload.size();
  if (!v.extras.empty()) {
    // Only a server's first message carries extras: its initial metadata.
    if (server_ctx_ != nullptr || initial_metadata_done_) return reset(status_code::internal, kNotAllowed);
    if (!take_server_metadata(v.extras, nullptr, true)) {
      return reset(status_code::resource_exhausted, "initial metadata beyond the channel's limits");
    }
  }
  if (server_ctx_ == nullptr) initial_metadata_done_ = true;  // a client's: received (or none sent)
  if (read_h_) {
    // A read waits (so the inbox is empty): parse straight from the receive buffer, release it.
    deliver(*read_into_, v.payload);
    message.release();
    return;
  }
  inbox_.emplace_back(reinterpret_cast<const char*>(v.payload.data()), v.payload.size());
}

bool stream_core::take_server_metadata(std::span<const std::byte> ex, std::string* status_message,
                                       bool initial_only) {
  if (ex.empty()) return true;
  const auto fields = extras::count_fields(ex);
  if (!fields || *fields > max_metadata_entries_ + 1 || ex.size() > max_metadata_bytes_) return false;
  std::string why;
  metadata initial, trailing;
  if (!extras::decode_response(ex, why, &initial, &trailing)) return false;
  if (status_message != nullptr) *status_message = std::move(why);
  const std::lock_guard lock(context_mutex_);  // release() may drop the context from any thread
  if (client_ctx_ != nullptr) {
    auto& to_initial = client_ctx_->mutable_server_initial_metadata();
    if (!initial_metadata_done_) to_initial.insert(to_initial.end(), initial.begin(), initial.end());
    if (!initial_only) {
      auto& to_trailing = client_ctx_->mutable_server_trailing_metadata();
      to_trailing.insert(to_trailing.end(), trailing.begin(), trailing.end());
    }
  }
  return true;
}

void stream_core::deliver(google::protobuf::MessageLite& out, std::span<const std::byte> bytes) {
  // Always checked: a stream keeps no method descriptor to ask whether its types may skip it.
  const bool parsed = detail::parse_message(out, bytes, true);
  read_into_ = nullptr;
  if (!parsed) {
    complete(read_h_, make_error_code(status_code::internal));
    return reset(status_code::internal, "cannot parse a message of the stream (" + out.GetTypeName() + ")");
  }
  complete(read_h_, {});
  consumed(bytes.size());
}

void stream_core::consumed(std::size_t bytes) {
  const auto grant = receive_window_.on_consumed(bytes);
  if (!grant || ended_ || !state_.peer_can_write()) return;
  out_frame f;
  f.bytes = encode(frame::kind::window_update, {}, {}, status_code::ok, grant->messages, grant->bytes);
  control_.push_back(std::move(f));
  pump();
}

void stream_core::finish_server(status_code code, const std::string& message) {
  if (ended_ || !state_.write_trailers()) return;
  metadata none;
  const std::string ex = extras::encode_response(
      message, server_ctx_ != nullptr && !initial_metadata_done_ ? server_ctx_->initial_metadata() : none,
      server_ctx_ != nullptr ? server_ctx_->trailing_metadata() : none);
  initial_metadata_done_ = true;
  out_frame f;
  f.bytes = encode(frame::kind::trailers, ex, {}, code);
  ordered_.push_back(std::move(f));
  end(code, message, true);
  pump();
}

void stream_core::reset(status_code code, std::string message) {
  if (ended_ || !state_.write_reset()) return;
  ordered_.clear();  // unsent messages are dropped: the stream is over
  const bool peer_knows = server_ctx_ != nullptr || open_sent_;
  if (peer_knows && conn_) {
    out_frame f;
    f.bytes = encode(frame::kind::reset, extras::encode_response(message), {}, code);
    control_.push_back(std::move(f));
  }
  end(code, std::move(message), false);
  pump();
}

void stream_core::fail(status_code code, std::string message) {
  conn_.reset();
  control_.clear();
  ordered_.clear();
  if (write_h_) complete(write_h_, make_error_code(ended_ ? code : write_error()));
  if (!ended_) {
    (void)state_.write_reset();
    end(code, std::move(message), false);
  }
  maybe_done();
}

void stream_core::end(status_code code, std::string message, bool clean) {
  ended_ = true;
  clean_end_ = clean;
  final_code_ = code;
  final_message_ = std::move(message);
  if (!clean) inbox_.clear();
  {
    const std::lock_guard lock(context_mutex_);
    if (client_ctx_ != nullptr) client_ctx_->set_result(code, final_message_);
  }
  // A write whose message still waits to go (behind our trailers) completes when it goes.
  if (write_h_ && !write_queued()) complete(write_h_, make_error_code(write_error()));
  if (read_h_ && inbox_.empty()) {
    complete(read_h_, clean ? boost::system::error_code(boost::asio::error::eof) : error_of(code));
  }
  if (finish_h_) complete(finish_h_, error_of(code));
  maybe_done();
}

bool stream_core::write_queued() const noexcept {
  for (const auto& f : ordered_) {
    if (f.completes_write) return true;
  }
  return false;
}

status_code stream_core::write_error() const noexcept {
  if (ended_ && final_code_ != status_code::ok) return final_code_;
  return status_code::failed_precondition;
}

void stream_core::maybe_done() {
  if (!ended_ || owner_told_) return;
  if (conn_ && (!control_.empty() || !ordered_.empty())) return;  // still flushing
  owner_told_ = true;
  if (deadline_timer_) deadline_timer_->cancel();
  conn_.reset();
  if (auto o = owner_.lock()) o->stream_ended(id_, final_code_);
}

// --- sending ------------------------------------------------------------------------------

std::string stream_core::encode(frame::kind kind, std::string_view ex, std::string_view payload,
                                status_code code, std::uint32_t method, std::uint64_t timeout,
                                std::uint8_t flags) const {
  frame::header h;
  h.kind = kind;
  h.flags = flags;
  h.status = code;
  h.call_id = id_;
  h.method_id = method;
  h.timeout_us = timeout;
  h.extras_length = static_cast<std::uint32_t>(ex.size());
  h.payload_length = static_cast<std::uint32_t>(payload.size());
  const std::size_t head = frame::header_size(h);
  std::string out(head + ex.size() + payload.size(), '\0');
  auto* p = reinterpret_cast<std::byte*>(out.data());
  frame::encode_header(h, std::span<std::byte>(p, head));
  if (!ex.empty()) std::memcpy(p + head, ex.data(), ex.size());
  if (!payload.empty()) std::memcpy(p + head + ex.size(), payload.data(), payload.size());
  return out;
}

std::string stream_core::message_extras() {
  if (server_ctx_ == nullptr || initial_metadata_done_) return {};
  initial_metadata_done_ = true;
  if (server_ctx_->initial_metadata().empty()) return {};
  return extras::encode_response({}, server_ctx_->initial_metadata());
}

std::deque<stream_core::out_frame>* stream_core::next_frame_queue() noexcept {
  if (!control_.empty()) return &control_;
  if (!ordered_.empty() && (!ordered_.front().message || send_window_.can_send())) return &ordered_;
  return nullptr;
}

void stream_core::pump() {
  while (conn_ && !reserving_) {
    auto* q = next_frame_queue();
    if (q == nullptr) break;
    if (q->front().is_open && !stamp_timeout(q->front())) {
      return reset(status_code::deadline_exceeded, "deadline exceeded before the stream was opened");
    }
    const std::size_t size = q->front().bytes.size();
    boost::system::error_code ec;
    auto r = conn_->try_reserve(size, ec);
    if (ec == boost::asio::error::would_block) return wait_for_room(size);
    if (ec == transport::errc::message_too_large) {
      const out_frame f = std::move(q->front());
      q->pop_front();
      if (f.message && f.completes_write) {
        complete(write_h_, make_error_code(status_code::resource_exhausted));
        continue;
      }
      reset(status_code::resource_exhausted,
            "stream frame larger than the connection's maximum message size");
      continue;
    }
    if (ec) return;  // the connection is ending: its owner fails the stream
    send_front(*q, std::move(r));
  }
  maybe_done();
}

// Writes the time left until the deadline into a stream_open about to go; false when none is left.
bool stream_core::stamp_timeout(out_frame& open) const {
  if (deadline_ == clock::time_point::max()) return true;
  const auto us = std::chrono::ceil<std::chrono::microseconds>(deadline_ - clock::now()).count();
  if (us <= 0) return false;
  frame::decode_error err{};
  auto* bytes = reinterpret_cast<std::byte*>(open.bytes.data());
  frame::header h = frame::decode(std::span<const std::byte>(bytes, open.bytes.size()), err).header;
  if (static_cast<std::uint64_t>(us) <= frame::kMaxTimeoutUs) {
    h.flags |= frame::kFlagHasTimeout;
    h.timeout_us = static_cast<std::uint64_t>(us);
  }
  frame::encode_header(h, std::span<std::byte, frame::kHeaderSize>(bytes, frame::kHeaderSize));
  return true;
}

void stream_core::wait_for_room(std::size_t bytes) {
  reserving_ = true;
  conn_->async_reserve(bytes, [self = shared_from_this(), conn = conn_.get()](boost::system::error_code ec,
                                                                              transport::send_reservation r) {
    self->reserving_ = false;
    if (ec || self->conn_.get() != conn) return;  // the connection ended: the owner fails us
    self->delivering([&] {
      auto* q = self->next_frame_queue();
      if (q != nullptr && q->front().bytes.size() <= r.size()) {
        self->send_front(*q, std::move(r));
      } else {
        r.cancel();  // what waited is gone (a reset dropped it)
      }
      self->pump();
    });
  });
}

void stream_core::send_front(std::deque<out_frame>& q, transport::send_reservation r) {
  out_frame f = std::move(q.front());
  q.pop_front();
  if (f.is_open && !stamp_timeout(f)) {
    r.cancel();
    return reset(status_code::deadline_exceeded, "deadline exceeded before the stream was opened");
  }
  std::memcpy(r.data().data(), f.bytes.data(), f.bytes.size());
  r.commit(f.bytes.size());
  if (f.is_open) open_sent_ = true;
  if (f.message) {
    send_window_.on_sent(f.payload);
    payload_bytes_.sent += f.payload;
  }
  if (f.completes_write) complete(write_h_, {});
}

bool stream_core::try_write_direct(const google::protobuf::MessageLite& message) {
  if (!conn_ || reserving_ || !control_.empty() || !ordered_.empty() || !send_window_.can_send())
    return false;
  if (server_ctx_ != nullptr && !initial_metadata_done_ && !server_ctx_->initial_metadata().empty())
    return false;
  const std::size_t payload = message.ByteSizeLong();
  if (payload > UINT32_MAX) return false;
  frame::header h;  // no extras
  h.kind = frame::kind::stream_message;
  h.call_id = id_;
  h.payload_length = static_cast<std::uint32_t>(payload);
  const std::size_t head = frame::header_size(h);
  boost::system::error_code ec;
  auto r = conn_->try_reserve(head + payload, ec);
  if (ec) return false;
  std::byte* out = r.data().data();
  frame::encode_header(h, r.data());
  message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out + head));
  // A writer that goes on writing (its completion is posted next) gets its messages sent together.
  r.commit_coalesced(head + payload);
  initial_metadata_done_ = initial_metadata_done_ || server_ctx_ != nullptr;
  send_window_.on_sent(payload);
  payload_bytes_.sent += payload;
  return true;
}

// --- stream_io ----------------------------------------------------------------------------

void stream_core::write(const google::protobuf::MessageLite& message, handler h) {
  if (on_own_thread()) return do_write(&message, {}, std::move(h));
  // Another thread: the caller may reuse `message` once we return.
  std::string bytes;
  const bool ok = message.IsInitialized() && message.SerializeToString(&bytes);
  boost::asio::post(
      ex_, [self = shared_from_this(), ok, bytes = std::move(bytes), h = std::move(h)]() mutable {
        if (!ok) {
          return self->post_completion(std::move(h), make_error_code(status_code::invalid_argument));
        }
        self->do_write(nullptr, std::move(bytes), std::move(h));
      });
}

bool stream_core::try_write(const google::protobuf::MessageLite& message) {
  if (!on_own_thread() || write_h_ || ended_ || !state_.write_message()) return false;
  // A writer that never waits would hold its io_context (and every other stream on it): after a
  // doorbell's worth of held messages it goes through async_write, which yields. Where nothing is
  // held (loopback, a corked tcp connection) the peer's window bounds the run instead.
  if (conn_ && conn_->held_commits() >= transport::connection::kMaxHeldCommits) return false;
  return message.IsInitialized() && try_write_direct(message);
}

void stream_core::do_write(const google::protobuf::MessageLite* message, std::string bytes, handler h) {
  if (write_h_ || ended_ || !state_.write_message()) {
    return post_completion(std::move(h),
                           make_error_code(write_h_ ? status_code::failed_precondition : write_error()));
  }
  if (message != nullptr) {
    if (!message->IsInitialized()) {
      return post_completion(std::move(h), make_error_code(status_code::invalid_argument));
    }
    if (try_write_direct(*message)) {
      return post_completion(std::move(h), {});
    }
    bytes = message->SerializeAsString();
  }
  store(write_h_, std::move(h));
  out_frame f;
  f.payload = bytes.size();
  f.bytes = encode(frame::kind::stream_message, message_extras(), bytes);
  f.message = true;
  f.completes_write = true;
  ordered_.push_back(std::move(f));
  pump();
}

void stream_core::read(google::protobuf::MessageLite& message, handler h) {
  run_here([self = shared_from_this(), m = &message, h = std::move(h)]() mutable {
    self->do_read(m, std::move(h));
  });
}

void stream_core::do_read(google::protobuf::MessageLite* message, handler h) {
  if (read_h_) {
    return post_completion(std::move(h), make_error_code(status_code::failed_precondition));
  }
  store(read_h_, std::move(h));
  read_into_ = message;
  if (!inbox_.empty()) {
    const std::string bytes = std::move(inbox_.front());
    inbox_.pop_front();
    return deliver(*message, std::as_bytes(std::span(bytes.data(), bytes.size())));
  }
  if (ended_)
    return complete(read_h_,
                    clean_end_ ? boost::system::error_code(boost::asio::error::eof) : error_of(final_code_));
  if (server_ctx_ != nullptr && !state_.peer_can_write()) return complete(read_h_, boost::asio::error::eof);
}

void stream_core::writes_done(handler h) {
  run_here([self = shared_from_this(), h = std::move(h)]() mutable { self->do_writes_done(std::move(h)); });
}

void stream_core::do_writes_done(handler h) {
  if (write_h_ || server_ctx_ != nullptr || ended_ || !state_.write_half_close()) {
    return post_completion(
        std::move(h), make_error_code(write_h_ || server_ctx_ != nullptr ? status_code::failed_precondition
                                                                         : write_error()));
  }
  store(write_h_, std::move(h));
  out_frame f;
  f.bytes = encode(frame::kind::half_close, {}, {});
  f.completes_write = true;
  ordered_.push_back(std::move(f));
  pump();
}

void stream_core::finish(handler h) {
  run_here([self = shared_from_this(), h = std::move(h)]() mutable { self->do_finish(std::move(h)); });
}

void stream_core::do_finish(handler h) {
  if (finish_h_ || server_ctx_ != nullptr) {
    return post_completion(std::move(h), make_error_code(status_code::failed_precondition));
  }
  store(finish_h_, std::move(h));
  if (ended_) complete(finish_h_, error_of(final_code_));
}

void stream_core::cancel() noexcept {
  // On the executor at once: client_stream's destructor relies on it (the stream's context may go
  // right after, and an ended stream never touches it again).
  if (on_own_thread()) return reset(status_code::cancelled, "cancelled by the caller");
  try {
    boost::asio::post(ex_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->reset(status_code::cancelled, "cancelled by the caller");
    });
  } catch (...) {
    rdmarpc::logger()->error("rdmarpc stream {}: cannot post its cancellation", id_);
  }
}

// --- handlers -----------------------------------------------------------------------------

// The handler's cancellation slot was connected to the stream by the initiating function (on the
// caller's thread, rpc/stream.hpp); it is cleared by the completion, on the handler's executor.
void stream_core::store(handler& slot, handler h) {
  slot = std::move(h);
  update_work();
}

void stream_core::complete(handler& slot, boost::system::error_code ec) {
  if (!slot) return;
  handler h = std::move(slot);
  update_work();
  if (delivering_ > 0 && ready_count_ < ready_.size()) {
    ready_[ready_count_++] = {std::move(h), ec};
    return;
  }
  post_completion(std::move(h), ec);
}

void stream_core::post_completion(handler h, boost::system::error_code ec) {
  rdmarpc::post_completion(std::move(h), ec, io_ex_, ex_);
}

// Runs the completions held back while a frame, timer or send room was handled. A message that
// arrives for a waiting read so completes it with no trip through the scheduler, and the next
// read is waiting before the next message of the same batch is handled (so it, too, is parsed
// straight from the receive buffer).
void stream_core::run_ready() {
  const auto self = shared_from_this();  // a handler may drop the last reference to the stream
  std::array<std::pair<handler, boost::system::error_code>, 3> ready;
  const std::size_t n = std::exchange(ready_count_, 0);
  for (std::size_t i = 0; i < n; ++i) ready[i] = std::move(ready_[i]);
  const bool here = on_own_thread();
  for (std::size_t i = 0; i < n; ++i) {
    auto& [op, ec] = ready[i];
    if (here && op->runs_on(*io_ex_)) {
      complete_in_place(std::move(op), ec, ex_);  // a handler's exception comes out of run()
    } else {
      post_completion(std::move(op), ec);
    }
  }
}

void stream_core::post_ready() noexcept {
  const std::size_t n = std::exchange(ready_count_, 0);
  for (std::size_t i = 0; i < n; ++i) {
    try {
      post_completion(std::move(ready_[i].first), ready_[i].second);
    } catch (...) {  // no memory to post it: dropped (the op frees itself)
      ready_[i].first.reset();
    }
  }
}

void stream_core::update_work() {
  const bool waiting = read_h_ || write_h_ || finish_h_;
  if (io_ex_ != nullptr) {
    if (waiting && !io_work_) {
      io_work_ = io_work_count(io_ex_);
    } else if (!waiting && io_work_) {
      io_work_.reset();
    }
  } else if (waiting && !work_) {
    work_ = boost::asio::prefer(ex_, boost::asio::execution::outstanding_work.tracked);
  } else if (!waiting && work_) {
    work_ = {};
  }
}

}  // namespace rdmarpc
