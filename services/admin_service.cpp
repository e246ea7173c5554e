#include "services/admin_service.hpp"

#include <boost/asio/use_awaitable.hpp>

namespace rdmarpc::services {

namespace v1 = rdmarpc::admin::v1;

void admin_service::add_to(rdmarpc::server& server) {
  server.add_service(*this);
  server_ = &server;
}

boost::asio::awaitable<v1::ServerStats> admin_service::get_stats(rdmarpc::server_context&,
                                                                 const v1::GetStatsRequest& request) {
  if (server_ == nullptr)
    throw status_error(status_code::failed_precondition,
                       "admin_service was added with server::add_service; use admin_service::add_to(server)");
  std::vector<connection_figures> connections;
  if (request.include_connections())
    connections = co_await server_->async_connection_figures(boost::asio::use_awaitable);
  // Read after the connections: the counters are at least as new as the figures.
  const auto methods = server_->method_metrics();
  auto out = to_message(server_->stats(), methods, connections, !methods.empty());
  out.set_uptime_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - added_at_).count());
  co_return out;
}

v1::ServerStats admin_service::to_message(const server_stats& s, const std::vector<method_stats>& methods,
                                          const std::vector<connection_figures>& connections, bool metrics) {
  v1::ServerStats out;
  out.set_connections(s.connections);
  out.set_connections_accepted(s.connections_accepted);
  out.set_connections_refused(s.connections_refused);
  out.set_pings_sent(s.pings_sent);
  out.set_pongs_received(s.pongs_received);
  out.set_pings_received(s.pings_received);
  out.set_heartbeat_timeouts(s.heartbeat_timeouts);
  out.set_too_many_pings(s.too_many_pings);
  out.set_metrics_enabled(metrics);
  for (const auto& m : methods) {
    auto* o = out.add_methods();
    o->set_method(m.name.empty() ? "unknown" : m.name);
    o->set_started(m.started);
    o->set_in_flight(m.in_flight());
    for (std::size_t code = 0; code < kStatusCodes; ++code) {
      if (m.finished[code] == 0) continue;
      auto* f = o->add_finished();
      f->set_code(std::string(to_string(static_cast<status_code>(code))));
      f->set_count(m.finished[code]);
    }
    o->set_request_bytes(m.request_bytes);
    o->set_response_bytes(m.response_bytes);
    o->set_latency_count(m.latency.count);
    if (m.latency.count != 0) {
      o->set_latency_mean_us(static_cast<double>(m.latency.sum_us) / static_cast<double>(m.latency.count));
      o->set_latency_p50_us(m.latency.percentile_us(0.5));
      o->set_latency_p90_us(m.latency.percentile_us(0.9));
      o->set_latency_p99_us(m.latency.percentile_us(0.99));
      o->set_latency_p999_us(m.latency.percentile_us(0.999));
    }
  }
  for (const auto& c : connections) {
    auto* o = out.add_connection_stats();
    o->set_peer(c.peer);
    o->set_transport(c.kind);
    o->set_age_seconds(std::chrono::duration<double>(c.age).count());
    o->set_calls_started(c.calls_started);
    o->set_calls_in_flight(c.calls_in_flight);
    o->set_messages_sent(c.counters.messages_sent);
    o->set_messages_received(c.counters.messages_received);
    o->set_bytes_sent(c.counters.bytes_sent);
    o->set_bytes_received(c.counters.bytes_received);
    o->set_credit_stalls(c.counters.credit_stalls);
    o->set_credit_only_messages(c.counters.credit_only_messages);
    o->set_fragments_sent(c.counters.fragments_sent);
    o->set_rnr_errors(c.counters.rnr_errors);
    o->set_pings_sent(c.pings_sent);
    o->set_pongs_received(c.pongs_received);
    o->set_pings_received(c.pings_received);
  }
  return out;
}

}  // namespace rdmarpc::services
