#include "options.hpp"

#include <charconv>
#include <cmath>
#include <string>

#include "cli_error.hpp"

namespace rdmarpc::cli {

std::string_view usage_text() noexcept {
  return R"(usage: rdmarpc COMMAND URI [ARGS] [OPTIONS]
  rdmarpc list URI [SERVICE]            the server's services, or one service's methods
  rdmarpc describe URI SYMBOL           a service, method, message or enum, as .proto text
  rdmarpc call URI SERVICE/METHOD [JSON]
                                        calls METHOD with JSON (default {}, or -d); prints each
                                        reply as one line of JSON (streams: a line per message)
  rdmarpc health URI [SERVICE]          grpc.health.v1 Check; exit status 0 only when SERVING
  rdmarpc stats URI                     the server's figures (rdmarpc.admin.v1 admin service): methods
                                        (calls by status, latency percentiles, bytes), connections
  rdmarpc bench URI SERVICE/METHOD --json JSON [--concurrency N] [--duration S]
                                        closed-loop load: progress each second on stderr, then a
                                        latency histogram, percentiles and calls/s

URI: tcp://HOST:PORT or rdma://HOST:PORT (or a list: rdma://10.0.0.1:7471,10.0.0.2:7471)
SERVICE/METHOD: package.Service/Method (package.Service.Method works too)

options:
  --proto FILE          read descriptors from FILE (repeatable) instead of asking the server's
                        reflection service (grpc.reflection.v1)
  -I, --import-path DIR where --proto files and their imports are looked up (repeatable; default .)
  -d, --data DATA       the request(s): JSON text, @FILE, or @- for stdin; several JSON objects
                        (one per line, or simply one after another) make several calls (client
                        and bidi streaming: several messages on one stream)
  --metadata KEY=VALUE  request metadata (repeatable)
  --timeout SECONDS     deadline of each call (of a whole stream); default none
  --heartbeat-timeout SECONDS
                        how long a silent server may take to answer a heartbeat before the
                        connection counts as lost (default 0.3; raise it for a server being
                        debugged or a machine too loaded to answer within that; 0: no heartbeats)
  --emit-defaults       print fields that hold their default value too
  -v, --verbose         show the rdmarpc library's log (connections) on stderr
  -h, --help            this text
bench:
  --json JSON           the request every call sends (or -d)
  --concurrency N       calls kept in flight (default 1)
  --duration SECONDS    measured time (default 10)
  --warmup SECONDS      calls made and not measured first (default 0)
  --output-json FILE    also write the results to FILE as one JSON object (stats too)

exit status: 0 OK (health: SERVING); 1 other failure; 2 usage or malformed URI; 3 request does not
fit the method (bad JSON, unknown field) or a .proto that does not compile; 4 unknown service,
method or symbol; 5 health: not SERVING; 64+N the call ended with canonical status N (e.g.
68 DEADLINE_EXCEEDED, 76 UNIMPLEMENTED, 78 UNAVAILABLE: server not reachable).
)";
}

double parse_seconds(std::string_view flag, std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  // At most 1e9 s (31 years): a steady_clock duration holds ~292 years of nanoseconds, and a larger
  // double would overflow its conversion.
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value) || value < 0 ||
      value > 1e9) {
    throw cli_error(kExitUsage, std::string(flag) + " wants a number of seconds (e.g. 1.5), not '" +
                                    std::string(text) + "'");
  }
  return value;
}

namespace {

std::size_t parse_count(std::string_view flag, std::string_view text) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0) {
    throw cli_error(kExitUsage,
                    std::string(flag) + " wants a positive whole number, not '" + std::string(text) + "'");
  }
  return value;
}

}  // namespace

options parse_options(int argc, char** argv) {
  options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_inline_value = false;
    if (arg.starts_with("--") && arg.find('=') != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      has_inline_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_inline_value) return value;
      if (i + 1 >= argc) throw cli_error(kExitUsage, arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (arg == "-v" || arg == "--verbose") {
      o.verbose = true;
    } else if (arg == "--emit-defaults") {
      o.emit_defaults = true;
    } else if (arg == "--proto") {
      o.proto_files.push_back(next());
    } else if (arg == "-I" || arg == "--import-path") {
      o.import_dirs.push_back(next());
    } else if (arg.starts_with("-I") && arg.size() > 2) {
      o.import_dirs.push_back(arg.substr(2));
    } else if (arg == "-d" || arg == "--data" || arg == "--json") {
      if (o.data) throw cli_error(kExitUsage, "give the request once (-d, --data or --json)");
      o.data = next();
    } else if (arg == "--metadata" || arg == "-H") {
      const std::string kv = next();
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw cli_error(kExitUsage, "--metadata wants KEY=VALUE, not '" + kv + "'");
      }
      o.metadata.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (arg == "--timeout" || arg == "--heartbeat-timeout") {
      const std::string text = next();
      const double s = parse_seconds(arg, text);
      const auto d =
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
      // A positive value that truncates to zero would silently mean "none" / "off".
      if (s > 0 && d == std::chrono::steady_clock::duration::zero()) {
        throw cli_error(kExitUsage,
                        arg + " " + text + " is shorter than the clock's tick (1 ns); " +
                            (arg == "--timeout" ? "leave it out for no deadline" : "0 turns heartbeats off"));
      }
      (arg == "--timeout" ? o.timeout : o.heartbeat_timeout) = d;
    } else if (arg == "--concurrency" || arg == "-c") {
      o.concurrency = parse_count(arg, next());
    } else if (arg == "--duration") {
      o.duration_s = parse_seconds(arg, next());
    } else if (arg == "--warmup") {
      o.warmup_s = parse_seconds(arg, next());
    } else if (arg == "--output-json") {
      o.output_json = next();
    } else if (arg.size() > 1 && arg.starts_with("-") && !has_inline_value) {
      throw cli_error(kExitUsage, "unknown option " + arg + " (rdmarpc --help lists them)");
    } else if (has_inline_value) {
      throw cli_error(kExitUsage, "unknown option " + arg + " (rdmarpc --help lists them)");
    } else {
      positional.push_back(std::move(arg));
    }
  }
  if (o.help) return o;
  if (positional.empty()) throw cli_error(kExitUsage, "no command given (rdmarpc --help)");
  o.command = positional[0];
  if (positional.size() < 2) throw cli_error(kExitUsage, "'" + o.command + "' needs a server URI");
  o.uri = positional[1];
  o.arguments.assign(positional.begin() + 2, positional.end());
  return o;
}

}  // namespace rdmarpc::cli
