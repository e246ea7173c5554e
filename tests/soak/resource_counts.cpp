#include "resource_counts.hpp"

#include <malloc.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// The sanitizer runtime's count of heap bytes in use (declared here: GCC 12 does not ship
// <sanitizer/allocator_interface.h>, which declares it for clang).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#define RDMARPC_SANITIZED_HEAP 1
#endif

namespace rdmarpc::soak {
namespace {

std::string proc_dir(int pid) {
  return pid == 0 ? "/proc/self" : "/proc/" + std::to_string(pid);
}

std::optional<std::size_t> count_fds(const std::string& dir) {
  std::size_t n = 0;
  std::error_code ec;
  auto it = std::filesystem::directory_iterator(dir, ec);
  if (ec) return std::nullopt;
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) ++n;
  return n;  // for /proc/self/fd this includes the directory's own fd, in every snapshot alike
}

std::optional<std::size_t> heap_in_use() {
#ifdef RDMARPC_SANITIZED_HEAP
  return __sanitizer_get_current_allocated_bytes();
#else
  return mallinfo2().uordblks;
#endif
}

std::string run_rdma_tool() {
  std::string out;
  FILE* p = ::popen("rdma resource show 2>/dev/null", "r");
  if (p == nullptr) return out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  ::pclose(p);
  return out;
}

}  // namespace

std::map<std::string, long> parse_rdma_resource_summary(const std::string& text) {
  std::map<std::string, long> counts;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string index, device, key;
    if (!(words >> index >> device) || index.empty() || index.back() != ':') continue;
    long value = 0;
    while (words >> key >> value) counts[key] += value;
  }
  return counts;
}

resource_counts count_resources() {
  resource_counts c;
  c.fds = count_fds("/proc/self/fd").value_or(0);
  c.heap_bytes = heap_in_use();
  c.rdma = parse_rdma_resource_summary(run_rdma_tool());
  c.rdma.erase("ctx");  // verbs contexts: librdmacm keeps its device contexts open for the process
  c.rdma.erase("srq");
  return c;
}

bool heap_count_includes_thread_caches() {
#ifdef RDMARPC_SANITIZED_HEAP
  return false;
#else
  // A freed block that goes to the thread's cache stays "in use" to mallinfo2; without the cache it
  // goes to a fast bin, which mallinfo2 counts as free. (volatile: the pair must not be elided.)
  void* volatile block = std::malloc(40);
  const std::size_t held = mallinfo2().uordblks;
  std::free(block);
  return mallinfo2().uordblks == held;
#endif
}

std::optional<std::size_t> parse_vm_rss(const std::string& status_text) {
  std::istringstream lines(status_text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream words(line.substr(6));
    std::size_t kib = 0;
    std::string unit;
    if (words >> kib >> unit && unit == "kB") return kib * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::size_t> resident_bytes(int pid) {
  std::ifstream in(proc_dir(pid) + "/status");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_vm_rss(text.str());
}

std::optional<std::size_t> open_fds(int pid) {
  return count_fds(proc_dir(pid) + "/fd");
}

std::string json_string(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      q += buf;
    } else {
      q += c;
    }
  }
  return q + "\"";
}

std::string resource_counts::growth_since(const resource_counts& before, std::size_t heap_slack) const {
  std::string grown;
  auto add = [&grown](const std::string& what, long long delta) {
    if (delta <= 0) return;
    if (!grown.empty()) grown += ", ";
    grown += what + " +" + std::to_string(delta);
  };
  add("fds", static_cast<long long>(fds) - static_cast<long long>(before.fds));
  if (heap_bytes && before.heap_bytes) {
    const long long delta = static_cast<long long>(*heap_bytes) - static_cast<long long>(*before.heap_bytes);
    if (delta > static_cast<long long>(heap_slack)) add("heap bytes", delta);
  }
  for (const auto& [kind, n] : rdma) {
    auto it = before.rdma.find(kind);
    add(kind, n - (it != before.rdma.end() ? it->second : 0));
  }
  return grown;
}

std::string resource_counts::to_string() const {
  std::string s = "fds " + std::to_string(fds);
  if (heap_bytes) s += ", heap " + std::to_string(*heap_bytes) + " B";
  for (const auto& [kind, n] : rdma) s += ", " + kind + " " + std::to_string(n);
  return s;
}

std::string resource_counts::to_json() const {
  std::string s = "{\"fds\": " + std::to_string(fds);
  if (heap_bytes) s += ", \"heap_bytes\": " + std::to_string(*heap_bytes);
  for (const auto& [kind, n] : rdma) s += ", \"" + kind + "\": " + std::to_string(n);
  return s + "}";
}

}  // namespace rdmarpc::soak
