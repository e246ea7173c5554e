#include "bench/common/driver.hpp"

#include <fstream>
#include <iostream>

namespace rdmarpc::bench {

client_options one_call_options() {
  client_options one;
  one.payloads = {64};
  one.concurrency = {1};
  one.load.warmup = std::chrono::nanoseconds(0);
  one.load.calls = 1;
  one.progress = false;
  return one;
}

void report_idle(const idle_result& r, const std::string& json_path) {
  std::cout << to_json(r) << std::endl;
  if (!json_path.empty()) std::ofstream(json_path, std::ios::app) << to_json(r) << '\n';
}

std::chrono::nanoseconds idle_duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(seconds));
}

}  // namespace rdmarpc::bench
