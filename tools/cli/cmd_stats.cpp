// rdmarpc stats URI: the server's figures from its admin service (rdmarpc.admin.v1.Admin/GetStats):
// a line for the server, a table of methods (calls by status, in flight, latency percentiles,
// bytes) and a table of connections (transport counters, heartbeats, RNR errors). --output-json
// FILE also writes the answer as JSON (protobuf's mapping of rdmarpc.admin.v1.ServerStats).

#include <google/protobuf/util/json_util.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "cli_error.hpp"
#include "commands.hpp"
#include "generic_call.hpp"
#include "rdmarpc/admin/v1/admin.pb.h"
#include "session.hpp"

namespace rdmarpc::cli {

namespace {

namespace asio = boost::asio;
namespace v1 = rdmarpc::admin::v1;
constexpr std::string_view kGetStats = "/rdmarpc.admin.v1.Admin/GetStats";

asio::awaitable<boost::system::error_code> get_stats(session& s, client_context& context,
                                                     v1::ServerStats& reply) {
  const method_descriptor md{kGetStats, method_id(kGetStats), rpc_kind::unary};
  v1::GetStatsRequest request;
  request.set_include_connections(true);
  auto [ec] = co_await async_generic_call(s.channel(), md, &context, request, reply,
                                          asio::as_tuple(asio::use_awaitable));
  co_return ec;
}

std::string fixed(double v, int decimals = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Prints rows as columns padded to their widest cell: numbers right-aligned, the first column (and
// the last, with `text_last`) left-aligned.
void print_table(const std::vector<std::vector<std::string>>& rows, bool text_last = false) {
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::string pad(width[i] - r[i].size(), ' ');
      if (i == 0) {
        line += r[i] + pad;
      } else if (text_last && i + 1 == r.size()) {
        line += "  " + r[i];
      } else {
        line += "  " + pad + r[i];
      }
    }
    std::cout << line << "\n";
  }
}

void print(const v1::ServerStats& s) {
  std::cout << "server: " << s.connections() << " connections (" << s.connections_accepted() << " accepted, "
            << s.connections_refused() << " refused), admin up " << fixed(s.uptime_seconds(), 1) << " s\n"
            << "heartbeats: " << s.pings_sent() << " pings sent, " << s.pongs_received()
            << " pongs received, " << s.pings_received() << " pings received; " << s.heartbeat_timeouts()
            << " heartbeat timeouts, " << s.too_many_pings() << " too_many_pings\n\n";
  if (!s.metrics_enabled()) {
    std::cout << "methods: no per-method figures (the server runs without server_options::metrics)\n\n";
  } else {
    std::vector<std::vector<std::string>> rows{{"method", "started", "in flight", "OK", "p50 us", "p90 us",
                                                "p99 us", "p99.9 us", "bytes in", "bytes out", "errors"}};
    for (const auto& m : s.methods()) {
      std::uint64_t ok = 0;
      std::string errors;
      for (const auto& f : m.finished()) {
        if (f.code() == "OK") {
          ok = f.count();
        } else {
          errors += (errors.empty() ? "" : " ") + f.code() + " " + std::to_string(f.count());
        }
      }
      const bool timed = m.latency_count() != 0;
      rows.push_back({m.method(), std::to_string(m.started()), std::to_string(m.in_flight()),
                      std::to_string(ok), timed ? fixed(m.latency_p50_us()) : "-",
                      timed ? fixed(m.latency_p90_us()) : "-", timed ? fixed(m.latency_p99_us()) : "-",
                      timed ? fixed(m.latency_p999_us()) : "-", std::to_string(m.request_bytes()),
                      std::to_string(m.response_bytes()), errors.empty() ? "-" : errors});
    }
    print_table(rows, true);
    std::cout << "\n";
  }
  std::vector<std::vector<std::string>> rows{
      {"connection", "transport", "age s", "calls", "in flight", "msgs out", "msgs in", "bytes out",
       "bytes in", "credit stalls", "credit-only", "fragments", "RNR errors", "pings out/pongs/pings in"}};
  for (const auto& c : s.connection_stats()) {
    rows.push_back({c.peer(), c.transport(), fixed(c.age_seconds(), 1), std::to_string(c.calls_started()),
                    std::to_string(c.calls_in_flight()), std::to_string(c.messages_sent()),
                    std::to_string(c.messages_received()), std::to_string(c.bytes_sent()),
                    std::to_string(c.bytes_received()), std::to_string(c.credit_stalls()),
                    std::to_string(c.credit_only_messages()), std::to_string(c.fragments_sent()),
                    std::to_string(c.rnr_errors()),
                    std::to_string(c.pings_sent()) + "/" + std::to_string(c.pongs_received()) + "/" +
                        std::to_string(c.pings_received())});
  }
  print_table(rows);
}

}  // namespace

int run_stats(const options& o) {
  if (!o.arguments.empty()) throw cli_error(kExitUsage, "stats takes no arguments after the URI");
  session s(o);
  v1::ServerStats reply;
  client_context context;
  s.prepare(context);
  const auto ec = s.run(get_stats(s, context, reply));
  if (ec) {
    const auto code = to_status_code(ec);
    if (code == status_code::unimplemented) {
      throw cli_error(exit_status_for(code),
                      "the server at " + o.uri +
                          " has no admin service (rdmarpc.admin.v1.Admin: UNIMPLEMENTED; "
                          "the server adds it with rdmarpc::services::admin_service)");
    }
    throw s.call_failed("stats", ec, context);
  }
  print(reply);
  if (!o.output_json.empty()) {
    std::string json;
    google::protobuf::util::JsonPrintOptions print_options;
    print_options.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(reply, &json, print_options);
    std::ofstream out(o.output_json);
    out << json << "\n";
    if (!out) throw cli_error(kExitFailure, "cannot write " + o.output_json);
  }
  return kExitOk;
}

}  // namespace rdmarpc::cli
