#pragma once
// rdmarpc::services::admin_service: the server's figures over rdmarpc itself
// (rdmarpc.admin.v1.Admin/GetStats): server counters, per-method calls by status, latency
// percentiles and bytes (server_options::metrics), and per-connection transport figures. What
// `rdmarpc stats URI` shows. Declare it before the server, then add it with one line:
//   rdmarpc::services::admin_service admin;  ...  admin.add_to(server);
// Layer: services (generated code over rpc). Threading: handlers run on the connection threads,
// several at once; everything read is thread-safe.

#include <boost/asio/awaitable.hpp>
#include <chrono>

#include "rdmarpc/admin/v1/admin.rdmarpc.pb.h"
#include "rpc/server.hpp"

namespace rdmarpc::services {

class admin_service final : public rdmarpc::admin::v1::Admin::Service {
 public:
  // server.add_service(*this), and GetStats reports `server`. Call it where services are added.
  // An admin_service added with plain server::add_service answers FAILED_PRECONDITION.
  void add_to(rdmarpc::server& server);

  // rdmarpc.admin.v1.Admin
  boost::asio::awaitable<rdmarpc::admin::v1::ServerStats> get_stats(
      rdmarpc::server_context& context, const rdmarpc::admin::v1::GetStatsRequest& request) override;

  // The figures as GetStats answers them (a test, or another transport, can call it directly).
  static rdmarpc::admin::v1::ServerStats to_message(const server_stats& server,
                                                    const std::vector<method_stats>& methods,
                                                    const std::vector<connection_figures>& connections,
                                                    bool metrics);

 private:
  rdmarpc::server* server_ = nullptr;
  std::chrono::steady_clock::time_point added_at_ = std::chrono::steady_clock::now();
};

}  // namespace rdmarpc::services
