#pragma once
// rdmarpc::services::health_service: gRPC's health checking protocol (grpc.health.v1.Health:
// Check and Watch) over the serving statuses the application sets. Add it with one line:
//   rdmarpc::services::health_service health;  server.add_service(health);
//   health.set_status("kv.Store", rdmarpc::services::kServing);
// Layer: services (generated code over rpc). Threading: set_status, clear_status, status,
// shutdown and resume may be called from any thread at any time; the handlers run on the server's
// connection threads. Like every service it must outlive the server it is added to.

#include <boost/asio/awaitable.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "grpc/health/v1/health.rdmarpc.pb.h"

namespace rdmarpc::services {

// UNKNOWN, SERVING, NOT_SERVING, SERVICE_UNKNOWN (the last only ever sent by Watch): the generated
// enum, also spelled grpc::health::v1::HealthCheckResponse::SERVING etc.
using serving_status = grpc::health::v1::HealthCheckResponse::ServingStatus;
inline constexpr serving_status kServing = grpc::health::v1::HealthCheckResponse::SERVING;
inline constexpr serving_status kNotServing = grpc::health::v1::HealthCheckResponse::NOT_SERVING;
inline constexpr serving_status kServiceUnknown = grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN;

// Check answers a service's status, or NOT_FOUND for a service that has none (as gRPC does).
// Watch sends the status at once (SERVICE_UNKNOWN for a service that has none: it may get one
// later), then every change until the client cancels, the call ends or shutdown(). A watcher
// whose client reads slowly keeps only the latest status it has not sent (gRPC does the same), so
// a watch holds at most one pending status whatever the rate of changes; the stream's window
// bounds what is in flight.
class health_service final : public grpc::health::v1::Health::Service {
 public:
  // The server as a whole ("") starts SERVING, as gRPC's default health service does; no other
  // service has a status until it is set.
  health_service();
  ~health_service() override;
  health_service(const health_service&) = delete;
  health_service& operator=(const health_service&) = delete;

  // Sets `service`'s status ("" = the whole server) and tells its watchers. Ignored after
  // shutdown() until resume().
  void set_status(std::string_view service, serving_status status);
  // Forgets `service`'s status: Check answers NOT_FOUND again, watchers see SERVICE_UNKNOWN.
  void clear_status(std::string_view service);
  // `service`'s status, or nullopt when it has none.
  std::optional<serving_status> status(std::string_view service) const;
  // The Watch calls open now (a figure for stats; tests see watches end with it).
  std::size_t watch_count() const;

  // For a server going down: every service with a status becomes NOT_SERVING, later set_status
  // calls are ignored, and every watch sends its last status and ends (OK), so watches do not
  // hold the server's graceful shutdown for its whole grace. Call it before
  // server::async_shutdown. Watches started after it send their status and end at once.
  void shutdown();
  // Undoes shutdown(): set_status works again, new watches stay open. Statuses are not restored.
  void resume();

  // grpc.health.v1.Health
  boost::asio::awaitable<grpc::health::v1::HealthCheckResponse> check(
      rdmarpc::server_context& context, const grpc::health::v1::HealthCheckRequest& request) override;
  boost::asio::awaitable<void> watch(
      rdmarpc::server_context& context, const grpc::health::v1::HealthCheckRequest& request,
      rdmarpc::server_writer<grpc::health::v1::HealthCheckResponse>& out) override;

 private:
  class watcher;

  // Under mutex_: tells `service`'s watchers its new status (or SERVICE_UNKNOWN).
  void notify_locked(std::string_view service, serving_status status);

  mutable std::mutex mutex_;
  std::map<std::string, serving_status, std::less<>> statuses_;
  std::multimap<std::string, std::shared_ptr<watcher>, std::less<>> watchers_;
  bool shut_down_ = false;
};

}  // namespace rdmarpc::services
