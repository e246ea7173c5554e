#include "bench/common/cpu_time.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
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

std::string to_json(const idle_result& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"kind\":\"idle\",\"system\":\"%s\",\"transport\":\"%s\",\"mode\":\"%s\",\"seconds\":%.6g,"
                "\"cpu_seconds\":%.6g,\"cpu_percent\":%.6g}",
                r.system.c_str(), r.transport.c_str(), r.mode.c_str(), r.seconds, r.cpu_seconds,
                r.seconds > 0 ? 100.0 * r.cpu_seconds / r.seconds : 0.0);
  return buf;
}

}  // namespace rdmarpc::bench
