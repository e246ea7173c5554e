#include "bench/common/bench_result.hpp"

#include <cstdio>
#include <fstream>
#include <ostream>
#include <stdexcept>
#include <utility>

namespace rdmarpc::bench {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + '"';
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string size_label(std::uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace

bench_result point_result(std::string system, std::string transport, std::string mode, std::uint64_t payload,
                          std::uint64_t concurrency, std::string rpc) {
  bench_result r;
  r.system = std::move(system);
  r.transport = std::move(transport);
  r.mode = std::move(mode);
  r.payload = payload;
  r.concurrency = concurrency;
  r.rpc = std::move(rpc);
  return r;
}

std::string point_label(const bench_result& r) {
  return r.system + " " + r.transport + (r.mode == "event" ? "" : " " + r.mode) +
         (r.rpc == "server_stream" ? " stream" : "") + " " + std::to_string(r.payload) + " B x" +
         std::to_string(r.concurrency);
}

void fill_from(bench_result& r, const closed_loop& loop, closed_loop::clock::time_point now) {
  const auto& h = loop.latency();
  r.calls = loop.completed();
  r.errors = loop.errors();
  r.seconds = std::chrono::duration<double>(loop.measured_time(now)).count();
  r.calls_per_s = r.seconds > 0 ? static_cast<double>(r.calls) / r.seconds : 0;
  r.mb_per_s = r.calls_per_s * static_cast<double>(r.payload) / 1e6;
  r.p50_us = static_cast<double>(h.percentile(50)) / 1e3;
  r.p90_us = static_cast<double>(h.percentile(90)) / 1e3;
  r.p99_us = static_cast<double>(h.percentile(99)) / 1e3;
  r.p999_us = static_cast<double>(h.percentile(99.9)) / 1e3;
  r.max_us = static_cast<double>(h.max()) / 1e3;
  r.mean_us = h.mean() / 1e3;
}

std::string to_json(const bench_result& r) {
  std::string s = "{";
  s += "\"system\":" + quoted(r.system);
  s += ",\"transport\":" + quoted(r.transport);
  s += ",\"mode\":" + quoted(r.mode);
  s += ",\"rpc\":" + quoted(r.rpc);
  s += ",\"payload\":" + std::to_string(r.payload);
  s += ",\"concurrency\":" + std::to_string(r.concurrency);
  s += ",\"calls\":" + std::to_string(r.calls);
  s += ",\"errors\":" + std::to_string(r.errors);
  s += ",\"seconds\":" + number(r.seconds);
  s += ",\"calls_per_s\":" + number(r.calls_per_s);
  s += ",\"mb_per_s\":" + number(r.mb_per_s);
  s += ",\"latency_us\":{\"p50\":" + number(r.p50_us) + ",\"p90\":" + number(r.p90_us) +
       ",\"p99\":" + number(r.p99_us) + ",\"p99.9\":" + number(r.p999_us) + ",\"max\":" + number(r.max_us) +
       ",\"mean\":" + number(r.mean_us) + "}";
  s += "}";
  return s;
}

void print_table(std::ostream& out, std::span<const bench_result> results) {
  char line[256];
  // For a server-streaming point (rpc "stream") calls are messages received.
  std::snprintf(line, sizeof line, "%-8s %-9s %-9s %-6s %8s %5s %9s %11s %9s %9s %9s %9s %9s %9s %6s\n",
                "system", "transport", "mode", "rpc", "payload", "conc", "calls", "calls/s", "MB/s", "p50 us",
                "p90 us", "p99 us", "p99.9 us", "max us", "errors");
  out << line;
  for (const auto& r : results) {
    std::snprintf(line, sizeof line,
                  "%-8s %-9s %-9s %-6s %8s %5llu %9llu %11.0f %9.2f %9.1f %9.1f %9.1f %9.1f %9.1f %6llu\n",
                  r.system.c_str(), r.transport.c_str(), r.mode.c_str(),
                  r.rpc == "server_stream" ? "stream" : r.rpc.c_str(), size_label(r.payload).c_str(),
                  static_cast<unsigned long long>(r.concurrency), static_cast<unsigned long long>(r.calls),
                  r.calls_per_s, r.mb_per_s, r.p50_us, r.p90_us, r.p99_us, r.p999_us, r.max_us,
                  static_cast<unsigned long long>(r.errors));
    out << line;
  }
  out.flush();
}

void append_json_line(const std::string& path, const bench_result& r) {
  std::ofstream f(path, std::ios::app);
  if (!f) throw std::runtime_error("cannot open " + path + " for appending");
  f << to_json(r) << '\n';
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace rdmarpc::bench
