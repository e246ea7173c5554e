#include "transport/rdma/rdma_listener.hpp"

#include <arpa/inet.h>
#include <netdb.h>

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "log/log.hpp"
#include "transport/rdma/cm_event_policy.hpp"
#include "transport/rdma/cm_event_pump.hpp"
#include "transport/rdma/conn_param.hpp"
#include "transport/rdma/qp_resources.hpp"
#include "transport/rdma/rdma_connection.hpp"
#include "transport/rdma/wire.hpp"
#include "transport/track_work.hpp"

namespace rdmarpc::transport::rdma {
namespace {

constexpr int kBacklog = 1024;
constexpr std::chrono::milliseconds kRebindRetry{1000};

[[noreturn]] void throw_errno(const char* what) {
  throw boost::system::system_error(boost::system::error_code(errno, boost::system::system_category()), what);
}

// A new id on CHANNEL, bound to ADDRESS and listening; throws with the failing call's errno.
verbs::cm_id listen_on(rdma_event_channel* channel, sockaddr* address) {
  auto id = verbs::make_cm_id(channel);
  if (rdma_bind_addr(id.get(), address) != 0) throw_errno("rdma_bind_addr");
  if (rdma_listen(id.get(), kBacklog) != 0) throw_errno("rdma_listen");
  return id;
}

}  // namespace

class rdma_listener::core final : public std::enable_shared_from_this<core>, public cm_event_pump::handler {
 public:
  core(boost::asio::any_io_executor ex, const endpoint& ep, const connection_options& options)
      : ex_(std::move(ex)), options_(options), local_(ep), handshake_timer_(ex_), rebind_timer_(ex_) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(ep.port);
    const char* host = ep.host.empty() ? nullptr : ep.host.c_str();
    if (const int rc = ::getaddrinfo(host, port.c_str(), &hints, &found); rc != 0 || found == nullptr) {
      throw boost::system::system_error(make_error_code(errc::unreachable),
                                        std::string("getaddrinfo: ") + gai_strerror(rc));
    }
    const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
    channel_ = verbs::make_event_channel();
    id_ = listen_on(channel_.get(), found->ai_addr);
    // With the port the kernel chose, so listening again (rebind) takes the same one.
    const sockaddr* bound = rdma_get_local_addr(id_.get());
    std::memcpy(&bound_address_, bound,
                bound->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    local_.scheme = scheme::rdma;
    local_.port = ntohs(rdma_get_src_port(id_.get()));
    events_.emplace(ex_, channel_.get());
  }

  ~core() { shutdown(); }

  void start() { events_->start(shared_from_this()); }

  boost::asio::any_io_executor executor() const { return ex_; }
  endpoint local_endpoint() const { return local_; }

  void accept(boost::asio::any_io_executor cex,
              boost::asio::any_completion_handler<connect_signature> handler) {
    if (closed_) {
      boost::asio::post(ex_, boost::asio::append(std::move(handler), boost::asio::error::operation_aborted,
                                                 std::shared_ptr<connection>()));
      return;
    }
    auto work = track_work(handler, ex_);
    waiters_.push_back({std::move(cex), std::move(handler), std::move(work)});
    serve();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    for (auto& w : waiters_) {
      boost::asio::post(ex_, boost::asio::append(std::move(w.handler), boost::asio::error::operation_aborted,
                                                 std::shared_ptr<connection>()));
    }
    waiters_.clear();
    // Destroyed in a later handler: an event being handled may still be unacknowledged.
    boost::asio::post(ex_, [self = shared_from_this()] { self->shutdown(); });
    if (events_) events_->stop();
  }

 private:
  using clock = std::chrono::steady_clock;
  struct pending {
    std::unique_ptr<qp_resources> resources;
    wire::handshake peer;
    clock::time_point deadline;  // of the handshake (options_.handshake_timeout)
  };
  struct waiter {
    boost::asio::any_io_executor executor;
    boost::asio::any_completion_handler<connect_signature> handler;
    boost::asio::any_completion_executor work;  // track_work(handler): until its completion is posted
  };

  void shutdown() noexcept {
    handshake_timer_.cancel();
    rebind_timer_.cancel();
    if (events_) events_->stop();
    ready_.clear();
    pending_.clear();
    id_.reset();
    channel_.reset();
  }

  // A failed read leaves the listener listening: the pump reads again at once a few times, then
  // after a pause that doubles up to a second (one bad event must not stop every future accept).
  bool on_cm_error(const boost::system::error_code& ec) override {
    rdmarpc::logger()->error("rdma listener {}: rdma_get_cm_event: {}", local_.to_uri(), ec.message());
    return !closed_;
  }
  void on_cm_events_drained() override { serve(); }

  void on_cm_event(verbs::cm_event event) override {
    if (closed_) return;
    rdma_cm_id* id = event->id;
    const rdma_cm_event_type type = event->event;
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      const auto bytes = private_data(*event);
      std::vector<std::byte> hello(bytes.begin(), bytes.end());
      // Acknowledge first: destroying the new id (on any failure below) waits for it.
      event.reset();
      on_connect_request(id, hello);
      return;
    }
    event.reset();
    if (id == id_.get()) {
      on_listening_id_event(type);
      return;
    }
    auto it = pending_.find(id);
    switch (type) {
      case RDMA_CM_EVENT_ESTABLISHED:
        if (it == pending_.end()) return;
        try {
          it->second.resources->migrate_to_own_channel();
          ready_.push_back(std::move(it->second));
        } catch (const std::exception& e) {
          rdmarpc::logger()->warn("rdma listener {}: {}", local_.to_uri(), e.what());
        }
        pending_.erase(it);
        return;
      default:
        if (drops_pending_handshake(type)) {
          if (it != pending_.end()) pending_.erase(it);  // destroys its QP, rings and cm_id
        } else {
          rdmarpc::logger()->debug("rdma listener {}: ignoring {}", local_.to_uri(), rdma_event_str(type));
        }
        return;
    }
  }

  void on_listening_id_event(rdma_cm_event_type type) {
    switch (listening_id_action(type)) {
      case listener_action::rebind:
        rdmarpc::logger()->warn("rdma listener {}: {}: listening again", local_.to_uri(),
                                rdma_event_str(type));
        rebind_failures_ = 0;
        rebind();
        return;
      case listener_action::ignore:
        rdmarpc::logger()->debug("rdma listener {}: ignoring {}", local_.to_uri(), rdma_event_str(type));
        return;
    }
  }

  // A new listening id on the same address and port. The old one goes first (it holds the port).
  // Retried every second while it fails (the device or address is not back yet), until it works
  // or the listener closes; the first failure is logged at error, the rest at debug.
  void rebind() {
    if (closed_) return;
    id_.reset();  // its events were acknowledged, which destroying it waits for
    try {
      id_ = listen_on(channel_.get(), reinterpret_cast<sockaddr*>(&bound_address_));
      if (rebind_failures_ > 0)
        rdmarpc::logger()->warn("rdma listener {}: listening again after {} failed tries", local_.to_uri(),
                                rebind_failures_);
    } catch (const std::exception& e) {
      rdmarpc::logger()->log(rebind_failures_++ == 0 ? spdlog::level::err : spdlog::level::debug,
                             "rdma listener {}: cannot listen again ({}); retrying every {} ms",
                             local_.to_uri(), e.what(), kRebindRetry.count());
      rebind_timer_.expires_after(kRebindRetry);
      rebind_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec) self->rebind();
      });
    }
  }

  void on_connect_request(rdma_cm_id* raw_id, const std::vector<std::byte>& private_data) {
    verbs::cm_id id(raw_id);
    const auto peer = wire::decode_handshake(private_data);
    if (!peer) {
      rdmarpc::logger()->warn("rdma listener {}: rejecting a connection: malformed handshake ({} bytes): {}",
                              local_.to_uri(), private_data.size(), peer.error().message());
      reject(id.get(), wire::reject_reason::malformed_handshake);
      return;  // `id` is destroyed here
    }
    // Before anything is allocated for it: a flood of requests that never complete costs at most
    // this many pending QPs with their rings.
    if (pending_.size() >= options_.max_pending_handshakes) {
      log_limit("rejecting a connection: max_pending_handshakes ({}) reached",
                options_.max_pending_handshakes);
      reject(id.get(), wire::reject_reason::too_many_handshakes);
      return;
    }
    // Checked here too, not only when the rings are leased: a failed lease in qp_resources has
    // taken the id with it, and the client would not learn why.
    if (options_.registered_memory &&
        !options_.registered_memory->would_fit(qp_resources::registered_bytes(options_))) {
      log_limit(
          "rejecting a connection: its rings ({} bytes) would take the registered memory past {} bytes "
          "({} in use)",
          qp_resources::registered_bytes(options_), options_.registered_memory->limit(),
          options_.registered_memory->in_use());
      reject(id.get(), wire::reject_reason::registered_memory_exhausted);
      return;
    }
    if (!set_ack_timeout(id.get(), options_))
      rdmarpc::logger()->warn("rdma listener {}: cannot set the ACK timeout: {}", local_.to_uri(),
                              std::strerror(errno));
    try {
      auto resources = std::make_unique<qp_resources>(verbs::make_event_channel(), std::move(id), options_);
      if (const auto ec = resources->post_whole_ring(); ec) {
        throw boost::system::system_error(ec, "posting the receive ring");
      }
      const auto hello = encode_local_handshake(options_);
      rdma_conn_param param = make_conn_param(hello, options_);
      if (rdma_accept(resources->id(), &param) != 0) throw_errno("rdma_accept");
      rdma_cm_id* key = resources->id();
      pending_[key] = pending{std::move(resources), *peer, clock::now() + options_.handshake_timeout};
      arm_handshake_timer();
    } catch (const boost::system::system_error& e) {
      const bool over_budget = e.code() == errc::registered_memory_exhausted;
      if (over_budget) {
        log_limit("rejecting a connection: {}", e.what());  // a limit: logged once at warning level
      } else {
        rdmarpc::logger()->warn("rdma listener {}: cannot accept a connection: {}", local_.to_uri(),
                                e.what());
      }
      if (id)
        reject(id.get(), over_budget ? wire::reject_reason::registered_memory_exhausted
                                     : wire::reject_reason::no_resources);
    } catch (const std::exception& e) {
      rdmarpc::logger()->warn("rdma listener {}: cannot accept a connection: {}", local_.to_uri(), e.what());
      if (id) reject(id.get(), wire::reject_reason::no_resources);
    }
  }

  // Refuses a connection request, telling the client why (wire::encode_reject).
  static void reject(rdma_cm_id* id, wire::reject_reason reason) noexcept {
    const auto why = wire::encode_reject(reason);
    rdma_reject(id, why.data(), static_cast<std::uint8_t>(why.size()));
  }

  // The handshake timer runs while handshakes are pending, set for the earliest deadline.
  void arm_handshake_timer() {
    if (timer_armed_ || pending_.empty() || closed_) return;
    auto earliest = clock::time_point::max();
    for (const auto& [id, p] : pending_) earliest = std::min(earliest, p.deadline);
    timer_armed_ = true;
    handshake_timer_.expires_at(earliest);
    handshake_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      self->timer_armed_ = false;
      if (!ec) self->drop_expired_handshakes();
    });
  }

  void drop_expired_handshakes() {
    if (closed_) return;
    const auto now = clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      log_limit("dropping a connection whose handshake did not complete within handshake_timeout ({} ms)",
                options_.handshake_timeout.count());
      it = pending_.erase(it);  // destroys its QP, rings and cm_id
    }
    arm_handshake_timer();
  }

  // A limit hit: the first time at warning level, then at debug (a flood must not flood the log).
  template <typename... Args>
  void log_limit(spdlog::format_string_t<Args...> what, Args&&... args) {
    const auto level = limit_logged_ ? spdlog::level::debug : spdlog::level::warn;
    limit_logged_ = true;
    rdmarpc::logger()->log(level, "rdma listener {}: {}", local_.to_uri(),
                           fmt::format(what, std::forward<Args>(args)...));
  }

  void serve() {
    while (!ready_.empty() && !waiters_.empty()) {
      pending p = std::move(ready_.front());
      ready_.pop_front();
      waiter w = std::move(waiters_.front());
      waiters_.pop_front();
      std::shared_ptr<connection> conn;
      boost::system::error_code ec;
      try {
        conn = std::make_shared<rdma_connection>(w.executor, std::move(p.resources), options_, p.peer);
      } catch (const std::exception& e) {
        rdmarpc::logger()->warn("rdma listener {}: {}", local_.to_uri(), e.what());
        ec = make_error_code(errc::device_error);
      }
      boost::asio::post(ex_, boost::asio::append(std::move(w.handler), ec, std::move(conn)));
    }
  }

  boost::asio::any_io_executor ex_;
  connection_options options_;
  endpoint local_;
  verbs::event_channel channel_;
  verbs::cm_id id_;
  std::optional<cm_event_pump> events_;     // on channel_'s fd
  std::map<rdma_cm_id*, pending> pending_;  // accepted, waiting for ESTABLISHED
  std::deque<pending> ready_;               // established, waiting for async_accept
  std::deque<waiter> waiters_;
  boost::asio::steady_timer handshake_timer_;  // for pending_'s earliest deadline
  boost::asio::steady_timer rebind_timer_;     // the next try to listen again after a failed one
  sockaddr_storage bound_address_{};           // what id_ listens on, port included
  int rebind_failures_ = 0;                    // in a row, since the event that asked for a rebind
  bool timer_armed_ = false;
  bool limit_logged_ = false;  // a handshake limit was hit (logged at warning once)
  bool closed_ = false;
};

rdma_listener::rdma_listener(boost::asio::any_io_executor ex, const endpoint& ep,
                             const connection_options& options)
    : core_(std::make_shared<core>(std::move(ex), ep, options)) {
  // On the executor: the first wait on the cm fd must start on the thread that runs it (the
  // caller's may be another while it runs; see device_event_monitor's destructor).
  boost::asio::post(core_->executor(), [core = core_] { core->start(); });
}

rdma_listener::~rdma_listener() {
  core_->close();
}

rdma_listener::executor_type rdma_listener::get_executor() const noexcept {
  return core_->executor();
}
void rdma_listener::close() {
  core_->close();
}
endpoint rdma_listener::local_endpoint() const {
  return core_->local_endpoint();
}

void rdma_listener::async_accept_impl(boost::asio::any_io_executor connection_executor,
                                      boost::asio::any_completion_handler<connect_signature> handler) {
  core_->accept(std::move(connection_executor), std::move(handler));
}

}  // namespace rdmarpc::transport::rdma
