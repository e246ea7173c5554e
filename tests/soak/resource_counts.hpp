#pragma once
// resource_counts: what a process holds that a leak would grow: open file descriptors, heap bytes
// in use, and the RDMA device's objects (QPs, MRs, CQs, PDs, rdma_cm ids, from `rdma resource
// show`). The churn test and the soak tools compare two snapshots; the fault soak also samples other
// processes (its servers) by pid. Test support, not library code.
// Threading: any thread; a snapshot is a plain value.

#include <cstddef>
#include <map>
#include <optional>
#include <string>

namespace rdmarpc::soak {

struct resource_counts {
  std::size_t fds = 0;
  std::optional<std::size_t> heap_bytes;  // malloc's bytes in use (the sanitizer's under ASan/TSan)
  // Device-wide object counts by kind ("qp", "mr", "cq", "pd", "cm_id"), summed over devices;
  // empty when the `rdma` tool or a device is missing. Device-wide: only meaningful where this
  // process is the device's only user (the test VM).
  std::map<std::string, long> rdma;

  // What grew from `before` to this one, in words ("fds +2, qp +1"); empty when nothing did.
  // Heap bytes count as grown beyond `heap_slack` bytes.
  std::string growth_since(const resource_counts& before, std::size_t heap_slack) const;
  std::string to_string() const;
  std::string to_json() const;
};

resource_counts count_resources();

// Whether heap_bytes also counts the small blocks a thread has freed but its malloc cache (glibc's
// tcache) still holds: then it moves by a few KB with what each thread happened to free last, not
// with what the process holds. The churn runs switch the cache off
// (GLIBC_TUNABLES=glibc.malloc.tcache_count=0) so the figure is exact; false under the sanitizers,
// whose count is exact anyway.
bool heap_count_includes_thread_caches();

// Another process's resident set (VmRSS of /proc/PID/status) in bytes, and its open file
// descriptors; empty when the process is gone (or not ours to read). pid 0 is this process.
std::optional<std::size_t> resident_bytes(int pid);
std::optional<std::size_t> open_fds(int pid);

// VmRSS of a /proc/PID/status text, in bytes; empty when the line is missing. Pure, for tests.
std::optional<std::size_t> parse_vm_rss(const std::string& status_text);

// `s` as a JSON string literal (quotes, backslashes and control characters escaped).
std::string json_string(const std::string& s);

// Parses `rdma resource show` output ("0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 0 srq 0" per
// device) into counts summed over devices. Pure, for tests.
std::map<std::string, long> parse_rdma_resource_summary(const std::string& text);

}  // namespace rdmarpc::soak
