// rdmarpc_churn: the churn soak as a command (tests/soak/churn.sh runs it for 10^4 cycles).
//   rdmarpc_churn [--target tcp|rdma] [--address ADDR] [--cycles N] [--warmup N] [--json FILE]
//                 [--mtrace]
// Prints a progress line, then a table of the counts before and after; writes the result as JSON
// when asked. Exit 0 only when every call succeeded and nothing leaked.
// --mtrace: glibc's malloc trace of the measured cycles, to find what a heap growth is made of:
//   LD_PRELOAD=libc_malloc_debug.so.0 MALLOC_TRACE=trace.txt rdmarpc_churn ... --mtrace
//   mtrace rdmarpc_churn trace.txt     (the blocks still allocated, by caller)
#include <mcheck.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "churn.hpp"

int main(int argc, char** argv) {
  // An exact heap figure needs glibc's per-thread caches off, which only the environment at start
  // can do: start again with it (once; then go on as we are).
  if (rdmarpc::soak::heap_count_includes_thread_caches() &&
      std::getenv("RDMARPC_CHURN_RESTARTED") == nullptr) {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    const std::string cache_off = "glibc.malloc.tcache_count=0";
    ::setenv("GLIBC_TUNABLES",
             tunables ? (std::string(tunables) + ":" + cache_off).c_str() : cache_off.c_str(), 1);
    ::setenv("RDMARPC_CHURN_RESTARTED", "1", 1);  // once
    ::execv("/proc/self/exe", argv);
    std::perror("rdmarpc_churn: could not restart without malloc's thread caches");
  }
  if (rdmarpc::soak::heap_count_includes_thread_caches())
    std::fprintf(stderr,
                 "rdmarpc_churn: the heap figure includes malloc's thread caches (a few KB of noise)\n");
  rdmarpc::soak::churn_options o;
  std::string json_path;
  bool warmup_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--target" && has_value) {
      o.target = argv[++i];
    } else if (arg == "--address" && has_value) {
      o.address = argv[++i];
    } else if (arg == "--cycles" && has_value) {
      o.cycles = std::stoul(argv[++i]);
    } else if (arg == "--warmup" && has_value) {
      o.warmup_cycles = std::stoul(argv[++i]);
      warmup_given = true;
    } else if (arg == "--json" && has_value) {
      json_path = argv[++i];
    } else if (arg == "--mtrace") {
      o.on_measure_start = [] { mtrace(); };
      o.on_measure_end = [] { muntrace(); };
    } else {
      std::cerr << "usage: rdmarpc_churn [--target tcp|rdma] [--address ADDR] [--cycles N] [--warmup N] "
                   "[--json FILE] [--mtrace]\n";
      return 2;
    }
  }
  if (o.target == "rdma" && o.address == "127.0.0.1") o.address = "10.0.0.1";
  if (o.target == "rdma" && !warmup_given) o.warmup_cycles = o.kRdmaWarmupCycles;
  // Every 10 %: a line with the heap in use, so a slow leak shows as a trend, not one number.
  o.progress = [&o](std::size_t done) {
    std::fprintf(stderr, "\rchurn %s: %zu / %zu cycles", o.target.c_str(), done, o.cycles);
    if (done % std::max<std::size_t>(1, o.cycles / 10) == 0 || done == o.cycles) {
      const auto now = rdmarpc::soak::count_resources();
      std::fprintf(stderr, "  (%s)\n", now.to_string().c_str());
    }
  };
  const auto r = rdmarpc::soak::run_churn(o);
  std::printf("churn over %s: %zu cycles (%zu calls ok) in %.1f s, %.1f ms a cycle\n", o.target.c_str(),
              r.cycles_done, r.calls_ok, r.seconds, r.cycles_done ? 1000 * r.seconds / r.cycles_done : 0.0);
  std::printf("%-8s %14s %14s\n", "", "before", "after");
  std::printf("%-8s %14zu %14zu\n", "fds", r.before.fds, r.after.fds);
  if (r.before.heap_bytes && r.after.heap_bytes)
    std::printf("%-8s %14zu %14zu\n", "heap B", *r.before.heap_bytes, *r.after.heap_bytes);
  for (const auto& [kind, n] : r.before.rdma) {
    auto it = r.after.rdma.find(kind);
    std::printf("%-8s %14ld %14ld\n", kind.c_str(), n, it != r.after.rdma.end() ? it->second : -1L);
  }
  if (!r.first_failure.empty()) std::printf("FAILED: %s\n", r.first_failure.c_str());
  std::printf("leaked: %s\n", r.leaked.empty() ? "nothing" : r.leaked.c_str());
  if (!json_path.empty()) std::ofstream(json_path) << r.to_json(o) << "\n";
  return r.ok() ? 0 : 1;
}
