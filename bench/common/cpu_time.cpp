#include "bench/common/cpu_time.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <system_error>

namespace rdmarpc::bench {

std::chrono::nanoseconds process_cpu_time() {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) throw std::system_error(errno, std::generic_category(), "getrusage");
  auto tv = [](const timeval& t) {
    return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec);
  };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

std::chrono::nanoseconds thread_cpu_time(pthread_t t) {
  clockid_t clock{};
  if (const int rc = ::pthread_getcpuclockid(t, &clock); rc != 0)
    throw std::system_error(rc, std::generic_category(), "pthread_getcpuclockid");
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0)
    throw std::system_error(errno, std::generic_category(), "clock_gettime");
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

std::string to_json(const idle_result& r) {
  const auto percent = [&](double cpu) { return r.seconds > 0 ? 100.0 * cpu / r.seconds : 0.0; };
  char buf[640];
  int n = std::snprintf(
      buf, sizeof buf,
      "{\"kind\":\"idle\",\"system\":\"%s\",\"transport\":\"%s\",\"mode\":\"%s\",\"seconds\":%.6g,"
      "\"cpu_seconds\":%.6g,\"cpu_percent\":%.6g",
      r.system.c_str(), r.transport.c_str(), r.mode.c_str(), r.seconds, r.cpu_seconds,
      percent(r.cpu_seconds));
  if (r.client_cpu_seconds >= 0 && r.server_cpu_seconds >= 0 && n > 0 &&
      static_cast<std::size_t>(n) < sizeof buf) {
    n += std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n),
                       ",\"client_cpu_percent\":%.6g,\"server_cpu_percent\":%.6g",
                       percent(r.client_cpu_seconds), percent(r.server_cpu_seconds));
  }
  std::string out(buf);
  return out + "}";
}

}  // namespace rdmarpc::bench
