#pragma once
// <rdmarpc/metrics.hpp>: method_stats, latency_histogram, prometheus_text (server::method_metrics,
// server_options::metrics_address). The public, prefixed name of rpc/call_metrics.hpp and
// rpc/prometheus_text.hpp (see there; threading rules included). Layer: public API.
#include "rpc/call_metrics.hpp"     // IWYU pragma: export
#include "rpc/prometheus_text.hpp"  // IWYU pragma: export
