#include "transport/rdma/rdma_connector.hpp"

#include <netdb.h>

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>
#include <cstring>
#include <string>

#include "log/log.hpp"
#include "transport/rdma/conn_param.hpp"
#include "transport/rdma/rdma_connection.hpp"
#include "transport/rdma/wire.hpp"
#include "verbs/error.hpp"

namespace rdmarpc::transport::rdma {
namespace {

// IB CM reject reason "invalid service ID": nobody listens on that port.
constexpr int kRejectInvalidServiceId = 8;

int timeout_ms(const connection_options& options) {
  return static_cast<int>(std::max<std::int64_t>(1, options.connect_timeout.count()));
}

}  // namespace

void rdma_connector::start(boost::asio::any_io_executor ex, const endpoint& ep,
                           const connection_options& options,
                           boost::asio::any_completion_handler<connect_signature> handler) {
  auto self = std::make_shared<rdma_connector>(ex, options, std::move(handler));
  boost::asio::post(ex, [self, ep] { self->begin(ep); });
}

rdma_connector::rdma_connector(boost::asio::any_io_executor ex, const connection_options& options,
                               boost::asio::any_completion_handler<connect_signature> handler)
    : ex_(std::move(ex)), options_(options), handler_(std::move(handler)), timer_(ex_) {}

void rdma_connector::begin(const endpoint& ep) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST;  // never a name lookup here: transport/connect.cpp
                                                     // resolves names without blocking
  addrinfo* found = nullptr;
  const std::string port = std::to_string(ep.port);
  if (const int rc = ::getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &found);
      rc != 0 || found == nullptr) {
    rdmarpc::logger()->debug("rdma connect {}: getaddrinfo: {}", ep.to_uri(), gai_strerror(rc));
    finish(make_error_code(errc::unreachable));
    return;
  }
  try {
    channel_ = verbs::make_event_channel();
    id_ = verbs::make_cm_id(channel_.get());
    events_.emplace(ex_, channel_.get());
    const int rc = rdma_resolve_addr(id_.get(), nullptr, found->ai_addr, timeout_ms(options_));
    const int err = errno;
    ::freeaddrinfo(found);
    found = nullptr;
    if (rc != 0) {
      rdmarpc::logger()->debug("rdma connect {}: rdma_resolve_addr: {}", ep.to_uri(), std::strerror(err));
      finish(make_error_code(errc::unreachable));
      return;
    }
  } catch (const std::exception& e) {
    if (found != nullptr) ::freeaddrinfo(found);
    rdmarpc::logger()->warn("rdma connect {}: {}", ep.to_uri(), e.what());
    finish(make_error_code(errc::unreachable));
    return;
  }
  timer_.expires_after(options_.connect_timeout);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->finish(make_error_code(errc::connect_timeout));
  });
  events_->start(shared_from_this());
}

void rdma_connector::on_cm_event(verbs::cm_event event) {
  if (done_) return;
  if (event->event == RDMA_CM_EVENT_ROUTE_RESOLVED) {
    // Acknowledged first: when making the queue pair fails (no registered memory left, a verbs
    // error), the id is destroyed, and rdma_destroy_id waits for its events to be acknowledged.
    event.reset();
    on_route_resolved();
    return;
  }
  on_event(*event);
}

void rdma_connector::on_route_resolved() {
  try {
    resources_ = std::make_unique<qp_resources>(std::move(channel_), std::move(id_), options_);
  } catch (const boost::system::system_error& e) {
    rdmarpc::logger()->warn("rdma connect: creating the queue pair failed: {}", e.what());
    finish(e.code() == errc::registered_memory_exhausted ? e.code() : make_error_code(errc::device_error));
    return;
  } catch (const std::exception& e) {
    rdmarpc::logger()->warn("rdma connect: creating the queue pair failed: {}", e.what());
    finish(make_error_code(errc::device_error));
    return;
  }
  // The whole ring is posted before the peer can send anything.
  if (const auto ec = resources_->post_whole_ring(); ec) {
    rdmarpc::logger()->warn("rdma connect: posting the receive ring failed: {}", ec.message());
    finish(make_error_code(errc::device_error));
    return;
  }
  const auto hello = encode_local_handshake(options_);
  rdma_conn_param param = make_conn_param(hello, options_);
  if (rdma_connect(resources_->id(), &param) != 0) {
    rdmarpc::logger()->warn("rdma connect: rdma_connect: {}", std::strerror(errno));
    finish(make_error_code(errc::unreachable));
  }
}

bool rdma_connector::on_cm_error(const boost::system::error_code& ec) {
  rdmarpc::logger()->warn("rdma connect: rdma_get_cm_event: {}", ec.message());
  finish(make_error_code(errc::unreachable));
  return false;
}

void rdma_connector::on_event(rdma_cm_event& event) {
  switch (event.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (!set_ack_timeout(id_.get(), options_))
        rdmarpc::logger()->warn("rdma connect: cannot set the ACK timeout: {}", std::strerror(errno));
      if (rdma_resolve_route(id_.get(), timeout_ms(options_)) != 0)
        finish(make_error_code(errc::unreachable));
      return;
    case RDMA_CM_EVENT_ESTABLISHED: {
      const auto peer = wire::decode_handshake(private_data(event));
      if (!peer) {
        rdmarpc::logger()->warn("rdma connect: server sent a malformed handshake: {}",
                                peer.error().message());
        finish(make_error_code(errc::handshake_rejected));
        return;
      }
      std::shared_ptr<connection> conn;
      try {
        events_->stop();  // the connection watches the same fd from now on
        conn = std::make_shared<rdma_connection>(ex_, std::move(resources_), options_, *peer);
      } catch (const std::exception& e) {
        rdmarpc::logger()->warn("rdma connect: {}", e.what());
        finish(make_error_code(errc::device_error));
        return;
      }
      finish({}, std::move(conn));
      return;
    }
    case RDMA_CM_EVENT_REJECTED: {
      // The listener says why in the private data; the kernel's own rejects carry none.
      const auto why = wire::decode_reject(private_data(event));
      rdmarpc::logger()->debug("rdma connect: rejected (status {}): {}", event.status,
                               why                                       ? wire::describe(*why)
                               : event.status == kRejectInvalidServiceId ? "nothing listens on that port"
                                                                         : "no reason given");
      if (why) {
        finish(make_error_code(wire::reject_error(*why)));
      } else {
        finish(make_error_code(event.status == kRejectInvalidServiceId ? errc::unreachable
                                                                       : errc::handshake_rejected));
      }
      return;
    }
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      rdmarpc::logger()->debug("rdma connect: {} (status {})", rdma_event_str(event.event), event.status);
      finish(make_error_code(errc::unreachable));
      return;
    case RDMA_CM_EVENT_DEVICE_REMOVAL: finish(make_error_code(errc::device_error)); return;
    // The route being set up no longer matches the IP stack: the channel's next attempt resolves anew.
    case RDMA_CM_EVENT_ADDR_CHANGE: finish(make_error_code(errc::address_changed)); return;
    default: rdmarpc::logger()->debug("rdma connect: ignoring {}", rdma_event_str(event.event)); return;
  }
}

void rdma_connector::finish(boost::system::error_code ec, std::shared_ptr<connection> conn) {
  if (done_) return;
  done_ = true;
  timer_.cancel();
  if (events_) events_->stop();
  // The event being handled may still be held (unacknowledged) by on_events(), and
  // rdma_destroy_id waits for it: tear down in a later handler.
  boost::asio::post(ex_, [self = shared_from_this()] {
    self->resources_.reset();
    self->id_.reset();
    self->channel_.reset();
  });
  boost::asio::post(ex_, boost::asio::append(std::move(handler_), ec, std::move(conn)));
}

}  // namespace rdmarpc::transport::rdma
