#include "rpc/server.hpp"

#include "rpc/extras.hpp"
#include "rpc/frame.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

namespace rdmarpc {
namespace {

using clock = std::chrono::steady_clock;

struct method_entry {
  service* svc = nullptr;
  std::size_t index = 0;  // in svc->methods()
  std::string_view full_name;
  std::size_t slot = 0;   // 0..(methods of the server - 1): where connections keep spare call objects
};

// One request being served. Owned by its server_connection until the handler coroutine ends.
struct active_call {
  active_call(boost::asio::any_io_executor ex, std::string_view method, std::string peer, clock::time_point deadline,
              metadata md)
      : ctx(std::move(ex), method, std::move(peer), deadline, std::move(md)) {}
  server_context ctx;
  boost::asio::cancellation_signal signal;  // terminal cancellation into the handler coroutine
  std::optional<boost::asio::steady_timer> timer;
  // The typed request (parsed from the receive buffer, which was released before the handler
  // started: holding it would pin an rdma receive slot, a peer credit) and the handler's reply.
  std::unique_ptr<server_call> call;
  const method_entry* method = nullptr;
  bool done = false;  // the handler finished; the reply waits for send room
};

// A response frame's parts; the reply is serialized straight into the reservation.
struct response_frame {
  response_frame(std::uint32_t id, status_code code, std::string_view message,
                 const google::protobuf::MessageLite* reply)
      : extras(extras::encode_response(message)), reply(reply), reply_size(reply ? reply->ByteSizeLong() : 0) {
    h.kind = frame::kind::response;
    h.call_id = id;
    h.status = code;
    h.extras_length = static_cast<std::uint32_t>(extras.size());
    h.payload_length = static_cast<std::uint32_t>(reply_size);
  }
  std::size_t size() const noexcept { return frame::kHeaderSize + extras.size() + reply_size; }
  void write(transport::send_reservation r) const {
    std::byte* out = r.data().data();
    frame::encode_header(h, std::span<std::byte, frame::kHeaderSize>(out, frame::kHeaderSize));
    if (!extras.empty()) std::memcpy(out + frame::kHeaderSize, extras.data(), extras.size());
    if (reply != nullptr) {
      reply->SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out + frame::kHeaderSize + extras.size()));
    }
    r.commit(size());
  }

  frame::header h;
  std::string extras;  // empty (no allocation) for an OK response
  const google::protobuf::MessageLite* reply;
  std::size_t reply_size;
};

}  // namespace

class server::impl : public std::enable_shared_from_this<server::impl> {
 public:
  class connection_state;

  impl(boost::asio::any_io_executor ex, server_options options) : ex_(std::move(ex)), options_(std::move(options)) {
    if (options_.max_in_flight_per_connection == 0) options_.max_in_flight_per_connection = 1;
    for (std::size_t i = 0; i < options_.threads; ++i) {
      contexts_.push_back(std::make_unique<boost::asio::io_context>(1));
      guards_.emplace_back(contexts_.back()->get_executor());
    }
    for (auto& ctx : contexts_) threads_.emplace_back([c = ctx.get()] { c->run(); });
  }

  void add_service(service& s) {
    for (service* existing : services_) {
      if (existing == &s || existing->full_name() == s.full_name())
        throw std::invalid_argument("rdmarpc::server: service " + std::string(s.full_name()) + " added twice");
    }
    std::unordered_map<std::uint32_t, method_entry> added;
    const auto methods = s.methods();
    for (std::size_t i = 0; i < methods.size(); ++i) {
      const auto& m = methods[i];
      if (m.id != method_id(m.full_name))
        throw std::invalid_argument("rdmarpc::server: method " + std::string(m.full_name) +
                                    " has an id that is not method_id(full name)");
      const auto clash = [&](const method_entry& other) {
        return std::invalid_argument("rdmarpc::server: method id of " + std::string(m.full_name) + " collides with " +
                                     std::string(other.full_name));
      };
      if (auto it = methods_.find(m.id); it != methods_.end()) throw clash(it->second);
      if (auto it = added.find(m.id); it != added.end()) throw clash(it->second);
      added.emplace(m.id, method_entry{&s, i, m.full_name, methods_.size() + added.size()});
    }
    methods_.merge(added);
    services_.push_back(&s);
  }

  std::size_t method_count() const noexcept { return methods_.size(); }

  const method_entry* find_method(std::uint32_t id) const noexcept {
    auto it = methods_.find(id);
    return it == methods_.end() ? nullptr : &it->second;
  }

  transport::endpoint listen(std::string_view uri) {
    auto ep = transport::parse_endpoint(uri);
    if (!ep) throw boost::system::system_error(ep.error(), "rdmarpc::server::listen(" + std::string(uri) + ")");
    std::shared_ptr<transport::listener> l = transport::make_listener(ex_, *ep, options_.transport);
    auto bound = l->local_endpoint();
    {
      std::lock_guard lock(mutex_);
      if (shutting_down_) throw std::logic_error("rdmarpc::server::listen after shutdown");
      listeners_.push_back(l);
    }
    spdlog::info("rdmarpc server: listening on {}", bound.to_uri());
    boost::asio::post(ex_, [self = shared_from_this(), l] { self->accept_next(l); });
    return bound;
  }

  void serve(std::shared_ptr<transport::connection> conn);

  void async_shutdown(clock::duration grace, boost::asio::any_completion_handler<void()> handler) {
    boost::asio::post(ex_, [self = shared_from_this(), grace, handler = std::move(handler)]() mutable {
      self->begin_shutdown();
      self->shutdown_handlers_.push_back(std::move(handler));
      if (self->in_flight_.load() == 0) {
        self->finish_shutdown();
        return;
      }
      if (!self->shutdown_timer_) {
        self->shutdown_timer_.emplace(self->ex_, grace);
        self->shutdown_timer_->async_wait([self](const boost::system::error_code& ec) {
          if (!ec) self->finish_shutdown();
        });
      }
    });
  }

  // ~server: stop accepting, close every connection, stop our threads.
  void stop() {
    begin_shutdown();
    close_connections();
    for (auto& g : guards_) g.reset();
    for (auto& t : threads_) t.join();
    std::lock_guard lock(mutex_);
    contexts_.clear();  // destroys handlers still queued there (and the references they hold)
  }

  // Called on a connection's executor whenever a call starts / ends.
  void call_started() noexcept { in_flight_.fetch_add(1); }
  void call_finished() {
    if (in_flight_.fetch_sub(1) == 1 && shutting_down_.load()) {
      boost::asio::post(ex_, [self = shared_from_this()] {
        if (self->in_flight_.load() == 0 && !self->shutdown_handlers_.empty()) self->finish_shutdown();
      });
    }
  }
  bool shutting_down() const noexcept { return shutting_down_.load(); }
  const server_options& options() const noexcept { return options_; }

  void remove_connection(connection_state* c) {
    std::lock_guard lock(mutex_);
    connections_.erase(c);
  }

 private:
  boost::asio::any_io_executor next_connection_executor() {
    std::lock_guard lock(mutex_);
    if (contexts_.empty()) return ex_;
    return contexts_[next_context_++ % contexts_.size()]->get_executor();
  }

  void accept_next(std::shared_ptr<transport::listener> l) {
    if (shutting_down_) return;
    l->async_accept(next_connection_executor(), [self = shared_from_this(), l](const boost::system::error_code& ec,
                                                                                std::shared_ptr<transport::connection> conn) {
      if (self->shutting_down_) {
        if (conn) boost::asio::post(conn->get_executor(), [conn] { conn->close(); });
        return;
      }
      if (ec) {
        if (ec == boost::asio::error::operation_aborted) return;
        // E.g. out of file descriptors or a failed rdma handshake: keep serving, but do not spin.
        spdlog::warn("rdmarpc server: accept on {} failed: {}", l->local_endpoint().to_uri(), ec.message());
        auto timer = std::make_shared<boost::asio::steady_timer>(self->ex_, std::chrono::milliseconds(50));
        timer->async_wait([self, l, timer](const boost::system::error_code&) { self->accept_next(l); });
        return;
      }
      self->serve(std::move(conn));
      self->accept_next(l);
    });
  }

  void begin_shutdown() {
    std::vector<std::shared_ptr<transport::listener>> listeners;
    {
      std::lock_guard lock(mutex_);
      shutting_down_ = true;
      listeners.swap(listeners_);
    }
    for (auto& l : listeners) boost::asio::post(ex_, [l] { l->close(); });
  }

  void finish_shutdown() {
    if (shutdown_timer_) shutdown_timer_->cancel();
    close_connections();
    auto handlers = std::move(shutdown_handlers_);
    shutdown_handlers_.clear();
    for (auto& h : handlers) boost::asio::post(ex_, std::move(h));
  }

  void close_connections();

  const boost::asio::any_io_executor ex_;
  server_options options_;
  // Registered before serving, read-only afterwards (from every connection's thread).
  std::vector<service*> services_;
  std::unordered_map<std::uint32_t, method_entry> methods_;

  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;

  std::mutex mutex_;  // guards the members below up to in_flight_
  std::vector<std::shared_ptr<transport::listener>> listeners_;
  std::unordered_map<connection_state*, std::weak_ptr<connection_state>> connections_;
  std::size_t next_context_ = 0;
  std::atomic<bool> shutting_down_{false};
  std::atomic<std::size_t> in_flight_{0};

  // On ex_:
  std::optional<boost::asio::steady_timer> shutdown_timer_;
  std::vector<boost::asio::any_completion_handler<void()>> shutdown_handlers_;
};

// The server side of one connection: decodes frames, runs calls, sends responses.
// Everything runs on the connection's executor.
class server::impl::connection_state final : public transport::connection_handler,
                                              public std::enable_shared_from_this<connection_state> {
 public:
  connection_state(std::shared_ptr<server::impl> srv, std::shared_ptr<transport::connection> conn)
      : server_(std::move(srv)), conn_(std::move(conn)), ex_(conn_->get_executor()), peer_(conn_->remote_address()) {}

  void start() { conn_->start(shared_from_this()); }
  const boost::asio::any_io_executor& get_executor_for_close() const noexcept { return ex_; }
  void close() {
    if (!closed_) conn_->close();
  }

  void on_message(transport::received_message message) override {
    if (closed_) return;
    frame::decode_error err{};
    const auto v = frame::decode(message.bytes(), err);
    if (err != frame::decode_error::none) return violation(frame::to_string(err));
    switch (v.header.kind) {
      case frame::kind::request: return on_request(v, message);
      case frame::kind::cancel: return on_cancel(v.header.call_id);
      case frame::kind::response: return violation("response frame sent to a server");
    }
  }

  void on_close(const boost::system::error_code& reason) override {
    if (!closed_) spdlog::debug("rdmarpc server: connection from {} ended: {}", peer_, reason.message());
    closed_ = true;
    for (auto& [id, c] : calls_) cancel(*c);
    server_->remove_connection(this);
    // conn_ is kept: calls still running hold us, and send() on a closed connection is harmless.
  }

 private:
  void violation(const char* why) {
    spdlog::warn("rdmarpc server: closing connection from {}: {}", peer_, why);
    closed_ = true;
    for (auto& [id, c] : calls_) cancel(*c);
    conn_->close();
  }

  static void cancel(active_call& c) {
    if (c.ctx.is_cancelled()) return;
    c.ctx.mark_cancelled();
    if (c.timer) c.timer->cancel();
    c.signal.emit(boost::asio::cancellation_type::terminal);
  }

  void on_cancel(std::uint32_t id) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    cancel(*it->second);
    if (it->second->done) forget(id);  // its reply was waiting for room: nobody reads it now
  }

  void on_request(const frame::view& v, transport::received_message& message) {
    const std::uint32_t id = v.header.call_id;
    if (calls_.contains(id)) return violation("duplicate call id");
    metadata md;
    if (!extras::decode_request(v.extras, md)) return violation("request extras do not parse");
    if (server_->shutting_down()) return refuse(id, status_code::unavailable, "server shutting down");
    if (calls_.size() >= server_->options().max_in_flight_per_connection)
      return refuse(id, status_code::resource_exhausted, "too many calls in flight on this connection");
    const method_entry* m = server_->find_method(v.header.method_id);
    if (m == nullptr) return refuse(id, status_code::unimplemented, "unknown method id " + std::to_string(v.header.method_id));
    auto typed = take_call(*m);
    if (!typed) return refuse(id, status_code::unimplemented, "method index out of range");
    // Parsed straight from the receive buffer, which goes back to the transport at once.
    const bool parsed = typed->parse_request(v.payload);
    message.release();
    if (!parsed) {
      refuse(id, status_code::invalid_argument, "cannot parse " + typed->request_type());
      return keep_call(*m, std::move(typed));
    }
    const auto deadline = v.header.has_timeout() ? clock::now() + std::chrono::microseconds(v.header.timeout_us)
                                                 : clock::time_point::max();
    auto c = std::make_unique<active_call>(ex_, m->full_name, peer_, deadline, std::move(md));
    c->call = std::move(typed);
    c->method = m;
    active_call& call = *c;
    calls_.emplace(id, std::move(c));
    server_->call_started();
    if (deadline != clock::time_point::max()) {
      call.timer.emplace(ex_, deadline);
      call.timer->async_wait([weak = weak_from_this(), id](const boost::system::error_code& ec) {
        if (ec) return;
        if (auto self = weak.lock()) self->on_cancel(id);
      });
    }
    boost::asio::co_spawn(ex_, call.call->run(call.ctx),
                          boost::asio::bind_cancellation_slot(
                              call.signal.slot(), [self = shared_from_this(), id](std::exception_ptr e) {
                                self->on_call_done(id, std::move(e));
                              }));
  }

  void on_call_done(std::uint32_t id, std::exception_ptr e) {
    auto it = calls_.find(id);
    active_call& c = *it->second;
    server_->call_finished();
    c.done = true;
    if (c.ctx.is_cancelled()) return forget(id);  // the client gave up (or is gone): nobody reads a reply
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const status_error& se) {
        c.ctx.set_status(se.code(), se.message());
      } catch (const std::exception& ex) {
        c.ctx.set_status(status_code::internal, std::string("handler threw: ") + ex.what());
      } catch (...) {
        c.ctx.set_status(status_code::internal, "handler threw a non-standard exception");
      }
    }
    reply(id, c);
  }

  // Sends call `id`'s reply when there is send room; else the call (still counted against
  // max_in_flight_per_connection) waits for room with the connection's async_reserve.
  void reply(std::uint32_t id, active_call& c) {
    if (closed_) return forget(id);
    auto f = response_for(id, c);
    boost::system::error_code ec;
    auto r = conn_->try_reserve(f.size(), ec);
    if (ec != boost::asio::error::would_block) {
      if (!ec) f.write(std::move(r));
      return forget(id);
    }
    conn_->async_reserve(f.size(), [self = shared_from_this(), id](boost::system::error_code ec,
                                                                   transport::send_reservation r) {
      auto it = self->calls_.find(id);
      if (it == self->calls_.end()) return;  // cancelled meanwhile
      if (!ec && !self->closed_) {
        const auto f = self->response_for(id, *it->second);
        if (f.size() <= r.size()) f.write(std::move(r));
      }
      self->forget(id);
    });
  }

  // The response to finished call `c`: its reply, or its status (also when the reply cannot go).
  response_frame response_for(std::uint32_t id, active_call& c) {
    if (c.ctx.status() != status_code::ok) return response_frame(id, c.ctx.status(), c.ctx.status_message(), nullptr);
    const google::protobuf::MessageLite& reply = c.call->reply();
    if (!reply.IsInitialized()) {
      return response_frame(id, status_code::internal,
                            "cannot serialize the reply of " + std::string(c.method->full_name), nullptr);
    }
    response_frame f(id, status_code::ok, {}, &reply);
    if (f.reply_size > std::numeric_limits<std::uint32_t>::max() || f.size() > conn_->max_message_size()) {
      return response_frame(id, status_code::resource_exhausted,
                            "response larger than the connection's maximum message size", nullptr);
    }
    return f;
  }

  void forget(std::uint32_t id) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    keep_call(*it->second->method, std::move(it->second->call));
    calls_.erase(it);
  }

  // Call objects of finished calls serve the next calls of the same method (their messages keep
  // their memory): no allocation for them in steady state. A few are kept per method.
  static constexpr std::size_t kSpareCallsPerMethod = 4;

  std::unique_ptr<server_call> take_call(const method_entry& m) {
    if (m.slot < spare_calls_.size() && !spare_calls_[m.slot].empty()) {
      auto call = std::move(spare_calls_[m.slot].back());
      spare_calls_[m.slot].pop_back();
      return call;
    }
    return m.svc->new_call(m.index);
  }

  void keep_call(const method_entry& m, std::unique_ptr<server_call> call) {
    if (!call) return;
    if (spare_calls_.size() <= m.slot) spare_calls_.resize(server_->method_count());
    if (m.slot >= spare_calls_.size() || spare_calls_[m.slot].size() >= kSpareCallsPerMethod) return;
    call->clear();
    spare_calls_[m.slot].push_back(std::move(call));
  }

  // Sends a response that has no call record behind it. would_block when there is no room now
  // (nothing sent); other errors mean the connection is ending (on_close follows).
  boost::system::error_code respond(std::uint32_t id, status_code code, std::string_view message) {
    if (closed_) return transport::errc::not_connected;
    const response_frame f(id, code, message, nullptr);
    boost::system::error_code ec;
    auto r = conn_->try_reserve(f.size(), ec);
    if (!ec) f.write(std::move(r));
    return ec;
  }

  // A refusal (no call record behind it): a peer that leaves no room even for that does not read
  // its responses, and is cut off.
  void refuse(std::uint32_t id, status_code code, std::string_view message) {
    if (respond(id, code, message) == boost::asio::error::would_block) violation("peer does not read its responses");
  }

  std::shared_ptr<server::impl> server_;
  std::shared_ptr<transport::connection> conn_;
  boost::asio::any_io_executor ex_;
  std::string peer_;
  bool closed_ = false;
  // Running calls, and finished ones whose reply waits for send room.
  std::unordered_map<std::uint32_t, std::unique_ptr<active_call>> calls_;
  std::vector<std::vector<std::unique_ptr<server_call>>> spare_calls_;  // by method_entry::slot
};

void server::impl::serve(std::shared_ptr<transport::connection> conn) {
  auto state = std::make_shared<connection_state>(shared_from_this(), conn);
  {
    std::lock_guard lock(mutex_);
    if (shutting_down_) {
      boost::asio::post(conn->get_executor(), [conn] { conn->close(); });
      return;
    }
    connections_.emplace(state.get(), state);
  }
  boost::asio::post(conn->get_executor(), [state] { state->start(); });
}

void server::impl::close_connections() {
  std::vector<std::shared_ptr<connection_state>> conns;
  {
    std::lock_guard lock(mutex_);
    for (auto& [ptr, weak] : connections_) {
      if (auto c = weak.lock()) conns.push_back(std::move(c));
    }
  }
  for (auto& c : conns) {
    auto ex = c->get_executor_for_close();
    boost::asio::post(ex, [c] { c->close(); });
  }
}

server::server(boost::asio::any_io_executor ex, server_options options)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(options))) {}

server::~server() { impl_->stop(); }

void server::add_service(service& s) { impl_->add_service(s); }

transport::endpoint server::listen(std::string_view uri) { return impl_->listen(uri); }

void server::serve(std::shared_ptr<transport::connection> connection) { impl_->serve(std::move(connection)); }

void server::async_shutdown(std::chrono::steady_clock::duration grace,
                            boost::asio::any_completion_handler<void()> handler) {
  impl_->async_shutdown(grace, std::move(handler));
}

}  // namespace rdmarpc
