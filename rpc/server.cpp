#include "rpc/server.hpp"

#include <atomic>
#include <boost/asio/append.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "log/log.hpp"
#include "rpc/method_table.hpp"
#include "rpc/metrics_http.hpp"
#include "rpc/prometheus_text.hpp"
#include "rpc/server_connection.hpp"

namespace rdmarpc {
namespace {

using clock = std::chrono::steady_clock;

// The transport and host part of a remote address ("tcp://10.0.0.2:5000" -> "tcp://10.0.0.2",
// "rdma://[fe80::1]:7471" -> "rdma://[fe80::1]"): what max_connections_per_peer counts by.
std::string peer_host(const peer_info& peer) {
  return std::string(peer.address.substr(0, peer.host.data() + peer.host.size() - peer.address.data()));
}

// Asks options.admit_connection about `peer`; nullptr admits, else why not.
const char* admission_refusal(const server_options& options, const peer_info& peer) {
  if (!options.admit_connection) return nullptr;
  try {
    return options.admit_connection(peer) ? nullptr : "refused by admit_connection";
  } catch (const std::exception& e) {
    rdmarpc::logger()->warn("rdmarpc server: admit_connection threw for {}: {} (connection refused)",
                            peer.address, e.what());
  } catch (...) {
    rdmarpc::logger()->warn("rdmarpc server: admit_connection threw for {} (connection refused)",
                            peer.address);
  }
  return "admit_connection threw";
}

// server_options::check_call as an interceptor: the chain's first.
class call_check_interceptor final : public server_interceptor {
 public:
  explicit call_check_interceptor(call_check check) : check_(std::move(check)) {}
  call_verdict on_call_start(const call_info& call, rdmarpc::metadata&) override {
    try {
      return check_(call);
    } catch (const std::exception& e) {
      return {status_code::internal, std::string("check_call threw: ") + e.what()};
    } catch (...) {
      return {status_code::internal, "check_call threw a non-standard exception"};
    }
  }

 private:
  call_check check_;
};

}  // namespace

// The server's lifecycle: listeners, connection threads, graceful shutdown.
class server::impl final : public server_connection::owner,
                           public std::enable_shared_from_this<server::impl> {
 public:
  impl(boost::asio::any_io_executor ex, server_options options)
      : ex_(std::move(ex)), options_(std::move(options)) {
    if (options_.max_in_flight_per_connection == 0) options_.max_in_flight_per_connection = 1;
    if (!options_.transport.registered_memory && options_.max_registered_memory != 0)
      options_.transport.registered_memory = transport::memory_budget::create(options_.max_registered_memory);
    if (!options_.transport.device_events && options_.watch_device_events)
      options_.transport.device_events = transport::make_device_event_monitor(ex_);
    for (std::size_t i = 0; i < options_.threads; ++i) {
      contexts_.push_back(std::make_shared<boost::asio::io_context>(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO));
      guards_.emplace_back(contexts_.back()->get_executor());
    }
    for (auto& ctx : contexts_) threads_.emplace_back([c = ctx.get()] { c->run(); });
  }

  void add_service(service& s) { methods_.add(s); }

  // server_connection::owner
  const method_table& methods() const noexcept override { return methods_; }
  const server_options& options() const noexcept override { return options_; }
  bool shutting_down() const noexcept override { return shutting_down_.load(); }
  void call_started() noexcept override { in_flight_.fetch_add(1); }
  void call_finished() override { in_flight_.fetch_sub(1); }
  server_connection::heartbeat_counters& heartbeats() noexcept override { return heartbeats_; }
  const interceptor_chain<server_interceptor>& interceptors() const noexcept override { return chain_; }
  call_metrics* metrics() const noexcept override { return metrics_.get(); }

  std::vector<method_stats> method_metrics() const {
    std::lock_guard lock(mutex_);
    return metrics_ ? metrics_->snapshot() : std::vector<method_stats>{};
  }

  void connection_figures_of_all(
      boost::asio::any_completion_handler<void(std::vector<connection_figures>)> handler);
  server_stats stats() const {
    server_stats s;
    s.pings_sent = heartbeats_.pings_sent.load(std::memory_order_relaxed);
    s.pongs_received = heartbeats_.pongs_received.load(std::memory_order_relaxed);
    s.pings_received = heartbeats_.pings_received.load(std::memory_order_relaxed);
    s.heartbeat_timeouts = heartbeats_.timeouts.load(std::memory_order_relaxed);
    s.too_many_pings = heartbeats_.too_many_pings.load(std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    s.connections = connections_.size();
    s.connections_accepted = accepted_;
    s.connections_refused = refused_;
    return s;
  }
  void connection_ended(server_connection* c) override {
    std::lock_guard lock(mutex_);
    auto it = connections_.find(c);
    if (it == connections_.end()) return;
    if (auto peer = per_peer_.find(it->second.peer); peer != per_peer_.end() && --peer->second == 0) {
      per_peer_.erase(peer);
    }
    connections_.erase(it);
    // The last connection of a graceful shutdown closed (each closes once drained): done.
    if (shutting_down_ && connections_.empty()) {
      boost::asio::post(ex_, [self = shared_from_this()] {
        if (!self->shutdown_handlers_.empty()) self->finish_shutdown();
      });
    }
  }

  transport::endpoint listen(std::string_view uri) {
    freeze();
    auto ep = transport::parse_endpoint(uri);
    if (!ep)
      throw boost::system::system_error(ep.error(), "rdmarpc::server::listen(" + std::string(uri) + ")");
    {
      std::lock_guard lock(mutex_);
      if (shutting_down_) throw std::logic_error("rdmarpc::server::listen after shutdown");
    }
    std::shared_ptr<transport::listener> l = transport::make_listener(ex_, *ep, options_.transport);
    auto bound = l->local_endpoint();
    bool after_shutdown = false;
    {
      std::lock_guard lock(mutex_);
      after_shutdown = shutting_down_;
      if (!after_shutdown) listeners_.push_back(l);
    }
    if (after_shutdown) {  // (began while the listener was made)
      // Let go of on ex_: its descriptors are ex_'s thread's to touch (the hint UNSAFE_IO, README).
      boost::asio::post(ex_, [l = std::move(l)]() mutable { l.reset(); });
      throw std::logic_error("rdmarpc::server::listen after shutdown");
    }
    rdmarpc::logger()->info("rdmarpc server: listening on {}", bound.to_uri());
    boost::asio::post(ex_, [self = shared_from_this(), l] { self->accept_next(l); });
    return bound;
  }

  void serve(std::shared_ptr<transport::connection> conn);

  void async_shutdown(clock::duration grace, boost::asio::any_completion_handler<void()> handler) {
    boost::asio::post(ex_, [self = shared_from_this(), grace, handler = std::move(handler)]() mutable {
      self->begin_shutdown();
      self->shutdown_handlers_.push_back(std::move(handler));
      // Every client is told to send nothing new (going_away); a connection closes once its client
      // answered and its calls and streams finished, and the last one to close completes us.
      if (self->for_each_connection([](server_connection& c) { c.go_away(); }) == 0) {
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
    std::unique_ptr<metrics_http> http;
    {
      std::lock_guard lock(mutex_);
      http = std::move(http_);
    }
    http.reset();  // first: a scrape in progress must not outlive what it reads
    begin_shutdown();
    close_connections();
    for (auto& g : guards_) g.reset();
    for (auto& t : threads_) t.join();
    std::lock_guard lock(mutex_);
    contexts_.clear();  // destroys handlers still queued there (and the references they hold)
  }

 private:
  // The io_context the next connection runs on (null: ex_).
  std::shared_ptr<boost::asio::io_context> next_connection_context() {
    std::lock_guard lock(mutex_);
    if (contexts_.empty()) return nullptr;
    return contexts_[next_context_++ % contexts_.size()];
  }

  void accept_next(std::shared_ptr<transport::listener> l) {
    if (shutting_down_) return;
    // The pending accept holds its connection's io_context: completing (even aborted), it builds the
    // connection's socket there, so ~server must not destroy that context under it.
    auto context = next_connection_context();
    const auto executor = context ? boost::asio::any_io_executor(context->get_executor()) : ex_;
    l->async_accept(executor, [self = shared_from_this(), l, context](
                                  const boost::system::error_code& ec,
                                  std::shared_ptr<transport::connection> conn) {
      if (self->shutting_down_) {
        if (conn) boost::asio::post(conn->get_executor(), [conn] { conn->close(); });
        return;
      }
      if (ec) {
        if (ec == boost::asio::error::operation_aborted) return;
        // E.g. out of file descriptors or a failed rdma handshake: keep serving, but do not spin.
        rdmarpc::logger()->warn("rdmarpc server: accept on {} failed: {}", l->local_endpoint().to_uri(),
                                ec.message());
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

  // Services are added before serving: the method table is complete, so its per-method limits
  // are set, and the metrics (indexed by method) and the interceptor chain are built now, once.
  // Connections read them afterwards.
  void freeze() {
    std::lock_guard lock(mutex_);
    if (frozen_) return;
    for (const auto& [name, bytes] : options_.max_request_bytes_by_method)
      methods_.limit_request_bytes(name, bytes);
    std::vector<std::shared_ptr<server_interceptor>> chain;
    if (options_.metrics || !options_.metrics_address.empty()) {
      metrics_ = std::make_shared<call_metrics>(methods_.names());  // not in the chain: see call_metrics
    }
    if (options_.check_call) chain.push_back(std::make_shared<call_check_interceptor>(options_.check_call));
    chain.insert(chain.end(), options_.interceptors.begin(), options_.interceptors.end());
    chain_ = interceptor_chain<server_interceptor>(std::move(chain));
    if (!options_.metrics_address.empty()) {
      http_ = std::make_unique<metrics_http>(
          options_.metrics_address, [weak = weak_from_this()](std::function<void(metrics_http::page)> done) {
            auto self = weak.lock();
            if (!self) return done([] { return std::string(); });
            self->connection_figures_of_all(
                boost::asio::any_completion_handler<void(std::vector<connection_figures>)>(
                    [stats = self->stats(), methods = self->method_snapshot(),
                     done = std::move(done)](std::vector<connection_figures> conns) mutable {
                      done([stats, methods = std::move(methods), conns = std::move(conns)] {
                        return prometheus_text(stats, methods, conns);
                      });
                    }));
          });
    }
    frozen_ = true;  // last: a metrics_address that cannot be bound throws from every listen()
  }

  // method_metrics() without the lock, for freeze() and the endpoint it starts: metrics_ is set
  // before the endpoint exists and never changes afterwards.
  std::vector<method_stats> method_snapshot() const {
    return metrics_ ? metrics_->snapshot() : std::vector<method_stats>{};
  }

 public:
  std::optional<std::string> metrics_endpoint() const {
    std::lock_guard lock(mutex_);
    return http_ ? std::optional<std::string>(http_->address()) : std::nullopt;
  }

 private:
  void close_connections();
  std::vector<std::shared_ptr<server_connection>> live_connections();
  // Runs `f` on every live connection, each on its own executor; returns how many.
  std::size_t for_each_connection(void (*f)(server_connection&));

  const boost::asio::any_io_executor ex_;
  server_options options_;
  // Registered before serving, read-only afterwards (from every connection's thread).
  method_table methods_;

  std::vector<std::shared_ptr<boost::asio::io_context>> contexts_;  // shared with pending accepts
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;

  mutable std::mutex mutex_;  // guards the members below up to in_flight_
  std::vector<std::shared_ptr<transport::listener>> listeners_;
  struct served {
    std::weak_ptr<server_connection> connection;
    std::string peer;  // peer_host() of its remote address
  };
  std::unordered_map<server_connection*, served> connections_;
  std::unordered_map<std::string, std::size_t> per_peer_;  // connections by peer host
  std::uint64_t refused_ = 0;   // connections refused by the limits or admit_connection
  std::uint64_t accepted_ = 0;  // connections served
  std::size_t next_context_ = 0;
  std::atomic<bool> shutting_down_{false};
  std::atomic<std::size_t> in_flight_{0};
  server_connection::heartbeat_counters heartbeats_;
  bool frozen_ = false;                          // freeze() ran
  std::shared_ptr<call_metrics> metrics_;        // server_options::metrics; set by freeze()
  interceptor_chain<server_interceptor> chain_;  // set by freeze(), read-only afterwards
  std::unique_ptr<metrics_http> http_;           // server_options::metrics_address; set by freeze()

  // On ex_:
  std::optional<boost::asio::steady_timer> shutdown_timer_;
  std::vector<boost::asio::any_completion_handler<void()>> shutdown_handlers_;
};

void server::impl::serve(std::shared_ptr<transport::connection> conn) {
  freeze();
  const std::string address = conn->remote_address();
  const auto info = peer_info::from_address(address);
  std::string peer = peer_host(info);
  // User code, so outside the lock; a refusal takes the same way out as the limits'.
  const char* not_admitted = admission_refusal(options_, info);
  std::shared_ptr<server_connection> state;
  const char* refused = nullptr;
  std::uint64_t refusals = 0;
  {
    std::lock_guard lock(mutex_);
    if (shutting_down_) {
      refused = "the server is shutting down";
    } else if (not_admitted != nullptr) {
      refused = not_admitted;
    } else if (connections_.size() >= options_.max_connections) {
      refused = "max_connections reached";
    } else if (per_peer_[peer] >= options_.max_connections_per_peer) {
      refused = "max_connections_per_peer reached";
    } else {
      state = server_connection::create(shared_from_this(), conn);
      ++per_peer_[peer];
      connections_.emplace(state.get(), served{state, std::move(peer)});
      ++accepted_;
    }
    if (refused != nullptr) {
      if (!shutting_down_) refusals = ++refused_;
      if (auto it = per_peer_.find(peer); it != per_peer_.end() && it->second == 0) per_peer_.erase(it);
    }
  }
  if (refused != nullptr) {
    if (refusals == 1) {
      rdmarpc::logger()->warn(
          "rdmarpc server: closing the connection from {}: {} (further refusals are logged at debug)",
          address, refused);
    } else if (refusals > 1) {
      rdmarpc::logger()->debug("rdmarpc server: closing the connection from {}: {}", address, refused);
    }
    boost::asio::post(conn->get_executor(), [conn] { conn->close(); });
    return;
  }
  // One line when a connection starts and one when it ends (server_connection's on_close, or the
  // warning that says why it was closed): connection events only, never per call.
  rdmarpc::logger()->info("rdmarpc server: accepted a connection from {}", address);
  boost::asio::post(conn->get_executor(), [state] { state->start(); });
}

std::vector<std::shared_ptr<server_connection>> server::impl::live_connections() {
  std::vector<std::shared_ptr<server_connection>> conns;
  std::lock_guard lock(mutex_);
  for (auto& [ptr, entry] : connections_) {
    if (auto c = entry.connection.lock()) conns.push_back(std::move(c));
  }
  return conns;
}

void server::impl::connection_figures_of_all(
    boost::asio::any_completion_handler<void(std::vector<connection_figures>)> handler) {
  // Each connection's figures are read on its own thread; the last one hands them all over.
  struct gathering {
    // Moved in by construction: Boost 1.81's any_completion_handler move assignment recurses.
    explicit gathering(boost::asio::any_completion_handler<void(std::vector<connection_figures>)> h)
        : handler(std::move(h)) {}
    std::mutex mutex;
    std::vector<connection_figures> figures;
    std::size_t left = 0;
    boost::asio::any_completion_handler<void(std::vector<connection_figures>)> handler;
    // Straight to the handler's associated executor (through the server's it would also need that
    // one running: a hang at ~server when it is not); inline when the last connection's thread is
    // that executor's.
    void deliver() { boost::asio::dispatch(boost::asio::append(std::move(handler), std::move(figures))); }
  };
  auto g = std::make_shared<gathering>(std::move(handler));
  auto conns = live_connections();
  g->left = conns.size();
  g->figures.reserve(conns.size());
  if (conns.empty()) return g->deliver();
  for (auto& c : conns) {
    boost::asio::post(c->get_executor(), [g, c] {
      auto f = c->figures();
      bool last = false;
      {
        std::lock_guard lock(g->mutex);
        g->figures.push_back(std::move(f));
        last = --g->left == 0;
      }
      if (last) g->deliver();  // outside the lock: the handler may run inline
    });
  }
}

std::size_t server::impl::for_each_connection(void (*f)(server_connection&)) {
  auto conns = live_connections();
  for (auto& c : conns) {
    auto ex = c->get_executor();
    boost::asio::post(ex, [c, f] { f(*c); });
  }
  return conns.size();
}

void server::impl::close_connections() {
  for_each_connection([](server_connection& c) { c.close(); });
}

server::server(boost::asio::any_io_executor ex, server_options options)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(options))) {}

server::~server() {
  impl_->stop();
}

server_stats server::stats() const {
  return impl_->stats();
}

std::vector<method_stats> server::method_metrics() const {
  return impl_->method_metrics();
}

std::optional<std::string> server::metrics_endpoint() const {
  return impl_->metrics_endpoint();
}

void server::connection_figures_of_all(
    boost::asio::any_completion_handler<void(std::vector<connection_figures>)> handler) {
  impl_->connection_figures_of_all(std::move(handler));
}

std::vector<std::string> server::service_names() const {
  std::vector<std::string> names;
  for (const service* s : impl_->methods().services()) names.emplace_back(s->full_name());
  return names;
}

void server::add_service(service& s) {
  impl_->add_service(s);
}

transport::endpoint server::listen(std::string_view uri) {
  return impl_->listen(uri);
}

void server::serve(std::shared_ptr<transport::connection> connection) {
  impl_->serve(std::move(connection));
}

void server::async_shutdown(std::chrono::steady_clock::duration grace,
                            boost::asio::any_completion_handler<void()> handler) {
  impl_->async_shutdown(grace, std::move(handler));
}

}  // namespace rdmarpc
