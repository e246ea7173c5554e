#pragma once
// prometheus_text: a server's figures (server_stats, per-method metrics, per-connection figures) in
// Prometheus' text exposition format 0.0.4, as the metrics endpoint serves them. Every metric is
// named and documented in docs/metrics.md. Pure: no I/O. Layer: rpc. Threading: stateless.

#include <string>
#include <vector>

#include "rpc/call_metrics.hpp"
#include "rpc/server.hpp"

namespace rdmarpc {

std::string prometheus_text(const server_stats& server, const std::vector<method_stats>& methods,
                            const std::vector<connection_figures>& connections);

}  // namespace rdmarpc
