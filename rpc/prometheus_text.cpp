#include "rpc/prometheus_text.hpp"

#include <fmt/format.h>

#include <chrono>
#include <string_view>

namespace rdmarpc {
namespace {

// A label value with \, " and newline escaped, as the format asks.
std::string escaped(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class writer {
 public:
  // The HELP and TYPE lines of a metric family.
  void family(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(std::string_view name, std::string_view labels, std::uint64_t value) {
    fmt::format_to(std::back_inserter(out_), "{}{}{}{} {}\n", name, labels.empty() ? "" : "{", labels,
                   labels.empty() ? "" : "}", value);
  }
  void sample(std::string_view name, std::string_view labels, double value) {
    fmt::format_to(std::back_inserter(out_), "{}{}{}{} {}\n", name, labels.empty() ? "" : "{", labels,
                   labels.empty() ? "" : "}", value);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string method_label(const method_stats& m) {
  return "method=\"" + escaped(m.name.empty() ? std::string_view("unknown") : std::string_view(m.name)) +
         "\"";
}

void write_methods(writer& w, const std::vector<method_stats>& methods) {
  if (methods.empty()) return;
  w.family("rdmarpc_server_calls_started_total", "counter", "Calls and streams started, by method.");
  for (const auto& m : methods) w.sample("rdmarpc_server_calls_started_total", method_label(m), m.started);
  w.family("rdmarpc_server_calls_finished_total", "counter",
           "Calls and streams finished, by method and status code (codes never seen are left out).");
  for (const auto& m : methods) {
    for (std::size_t code = 0; code < kStatusCodes; ++code) {
      if (m.finished[code] == 0 && code != 0) continue;
      w.sample("rdmarpc_server_calls_finished_total",
               method_label(m) + ",code=\"" + std::string(to_string(static_cast<status_code>(code))) + "\"",
               m.finished[code]);
    }
  }
  w.family("rdmarpc_server_calls_in_flight", "gauge", "Calls and streams running now, by method.");
  for (const auto& m : methods) w.sample("rdmarpc_server_calls_in_flight", method_label(m), m.in_flight());
  w.family("rdmarpc_server_request_bytes_total", "counter", "Request message bytes received, by method.");
  for (const auto& m : methods)
    w.sample("rdmarpc_server_request_bytes_total", method_label(m), m.request_bytes);
  w.family("rdmarpc_server_response_bytes_total", "counter", "Response message bytes sent, by method.");
  for (const auto& m : methods)
    w.sample("rdmarpc_server_response_bytes_total", method_label(m), m.response_bytes);

  // Cumulative buckets at every power of two of microseconds (the histogram's own buckets are
  // finer: 8 per power of two; those are what the admin service's percentiles use).
  w.family("rdmarpc_server_call_duration_seconds", "histogram",
           "Time from a call's start to its end on the server, by method.");
  for (const auto& m : methods) {
    const std::string label = method_label(m);
    std::uint64_t cumulative = 0;
    std::size_t b = 0;
    // The last bucket holds everything beyond its start (no upper bound): it is only in +Inf.
    constexpr std::size_t kBounded = latency_histogram::kBuckets - 1;
    for (std::uint64_t bound_us = 1; b < kBounded; bound_us *= 2) {
      while (b < kBounded && latency_histogram::upper_us(b) <= bound_us) cumulative += m.latency.counts[b++];
      w.sample("rdmarpc_server_call_duration_seconds_bucket",
               label + fmt::format(",le=\"{}\"", static_cast<double>(bound_us) / 1e6), cumulative);
    }
    w.sample("rdmarpc_server_call_duration_seconds_bucket", label + ",le=\"+Inf\"", m.latency.count);
    w.sample("rdmarpc_server_call_duration_seconds_sum", label, static_cast<double>(m.latency.sum_us) / 1e6);
    w.sample("rdmarpc_server_call_duration_seconds_count", label, m.latency.count);
  }
}

void write_server(writer& w, const server_stats& s) {
  const auto gauge = [&](const char* name, const char* help, std::uint64_t v) {
    w.family(name, "gauge", help);
    w.sample(name, "", v);
  };
  const auto counter = [&](const char* name, const char* help, std::uint64_t v) {
    w.family(name, "counter", help);
    w.sample(name, "", v);
  };
  gauge("rdmarpc_server_connections", "Connections served now.", s.connections);
  counter("rdmarpc_server_connections_accepted_total", "Connections served since the server started.",
          s.connections_accepted);
  counter("rdmarpc_server_connections_refused_total",
          "Connections closed at once: admit_connection, max_connections(_per_peer).", s.connections_refused);
  counter("rdmarpc_server_pings_sent_total", "Heartbeat pings sent to clients.", s.pings_sent);
  counter("rdmarpc_server_pongs_received_total", "Heartbeat pongs clients answered with.", s.pongs_received);
  counter("rdmarpc_server_pings_received_total", "Heartbeat pings received from clients.", s.pings_received);
  counter("rdmarpc_server_heartbeat_timeouts_total", "Connections ended because a client stopped answering.",
          s.heartbeat_timeouts);
  counter("rdmarpc_server_too_many_pings_total", "Connections ended because a client pinged too often.",
          s.too_many_pings);
}

void write_connections(writer& w, const std::vector<connection_figures>& connections) {
  if (connections.empty()) return;
  struct field {
    const char* name;
    const char* type;
    const char* help;
    std::uint64_t (*get)(const connection_figures&);
  };
  static constexpr field fields[] = {
      {"rdmarpc_connection_age_seconds", "gauge", "Seconds since the connection was accepted.",
       [](const connection_figures& c) {
         return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(c.age).count());
       }},
      {"rdmarpc_connection_calls_started_total", "counter", "Calls and streams started on the connection.",
       [](const connection_figures& c) { return c.calls_started; }},
      {"rdmarpc_connection_calls_in_flight", "gauge", "Calls and streams running on the connection now.",
       [](const connection_figures& c) { return c.calls_in_flight; }},
      {"rdmarpc_connection_messages_sent_total", "counter", "Transport messages sent.",
       [](const connection_figures& c) { return c.counters.messages_sent; }},
      {"rdmarpc_connection_messages_received_total", "counter", "Transport messages received.",
       [](const connection_figures& c) { return c.counters.messages_received; }},
      {"rdmarpc_connection_bytes_sent_total", "counter", "Transport bytes sent.",
       [](const connection_figures& c) { return c.counters.bytes_sent; }},
      {"rdmarpc_connection_bytes_received_total", "counter", "Transport bytes received.",
       [](const connection_figures& c) { return c.counters.bytes_received; }},
      {"rdmarpc_connection_credit_stalls_total", "counter",
       "Times a message waited for the peer's credits (rdma).",
       [](const connection_figures& c) { return c.counters.credit_stalls; }},
      {"rdmarpc_connection_credit_only_messages_total", "counter",
       "Credit updates sent without payload (rdma).",
       [](const connection_figures& c) { return c.counters.credit_only_messages; }},
      {"rdmarpc_connection_fragments_sent_total", "counter",
       "Sends posted for messages (rdma; several per large message).",
       [](const connection_figures& c) { return c.counters.fragments_sent; }},
      {"rdmarpc_connection_rnr_errors_total", "counter",
       "Receiver-not-ready errors (rdma); anything but 0 is a bug.",
       [](const connection_figures& c) { return c.counters.rnr_errors; }},
      {"rdmarpc_connection_pings_sent_total", "counter", "Heartbeat pings sent on the connection.",
       [](const connection_figures& c) { return c.pings_sent; }},
      {"rdmarpc_connection_pongs_received_total", "counter", "Heartbeat pongs received on the connection.",
       [](const connection_figures& c) { return c.pongs_received; }},
      {"rdmarpc_connection_pings_received_total", "counter", "Heartbeat pings received on the connection.",
       [](const connection_figures& c) { return c.pings_received; }},
  };
  std::vector<std::string> labels;
  labels.reserve(connections.size());
  for (const auto& c : connections)
    labels.push_back("peer=\"" + escaped(c.peer) + "\",transport=\"" + escaped(c.kind) + "\"");
  for (const auto& f : fields) {
    w.family(f.name, f.type, f.help);
    for (std::size_t i = 0; i < connections.size(); ++i) w.sample(f.name, labels[i], f.get(connections[i]));
  }
}

}  // namespace

std::string prometheus_text(const server_stats& server, const std::vector<method_stats>& methods,
                            const std::vector<connection_figures>& connections) {
  writer w;
  write_server(w, server);
  write_methods(w, methods);
  write_connections(w, connections);
  return w.take();
}

}  // namespace rdmarpc
