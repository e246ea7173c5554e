// Churn over tcp (and the pure parser of `rdma resource show`): connect, call, disconnect, many
// times; the process must end holding what it held before (fds, heap). The full 10^4 cycles run in
// tests/soak/churn.sh; CI runs a shorter count here.
#include "churn.hpp"

#include <catch2/catch.hpp>

using namespace rdmarpc::soak;

TEST_CASE("rdma resource summaries are summed per kind over devices", "[soak]") {
  const auto counts = parse_rdma_resource_summary(
      "0: rxe0: pd 2 cq 4 qp 2 cm_id 3 mr 6 ctx 0 srq 0\n"
      "1: mlx5_0: pd 1 cq 1 qp 1 cm_id 0 mr 1 ctx 1 srq 0\n"
      "garbage line\n");
  CHECK(counts.at("pd") == 3);
  CHECK(counts.at("qp") == 3);
  CHECK(counts.at("mr") == 7);
  CHECK(counts.at("cm_id") == 3);
  CHECK(parse_rdma_resource_summary("").empty());
}

TEST_CASE("growth_since names what grew and ignores what shrank", "[soak]") {
  resource_counts before;
  before.fds = 10;
  before.heap_bytes = 1000;
  before.rdma = {{"qp", 2}, {"mr", 4}};
  resource_counts after = before;
  CHECK(after.growth_since(before, 0).empty());
  after.fds = 9;
  after.heap_bytes = 1500;
  after.rdma["qp"] = 3;
  CHECK(after.growth_since(before, 1000) == "qp +1");
  CHECK(after.growth_since(before, 100) == "heap bytes +500, qp +1");
}

TEST_CASE("VmRSS is read from a /proc/PID/status text", "[soak]") {
  CHECK(parse_vm_rss("Name:\tx\nVmPeak:\t  9000 kB\nVmRSS:\t    1234 kB\nThreads: 3\n") == 1234u * 1024);
  CHECK_FALSE(parse_vm_rss("Name:\tkthreadd\nThreads: 1\n"));
  CHECK(resident_bytes(0).value_or(0) > 0);
  CHECK(open_fds(0).value_or(0) >= 3);
  CHECK_FALSE(resident_bytes(-1));
}

TEST_CASE("json_string escapes quotes, backslashes and control characters", "[soak]") {
  CHECK(json_string("a\"b\\c\n") == "\"a\\\"b\\\\c\\u000a\"");
}

TEST_CASE("tcp churn: 300 connect/call/disconnect cycles leak no fd and no heap", "[soak]") {
  churn_options o;
  o.target = "tcp";
  o.address = "127.0.0.1";
  o.cycles = 300;
  // The heap check is exact only without glibc's thread caches: ctest runs this binary with
  // GLIBC_TUNABLES=glibc.malloc.tcache_count=0 (tests/soak/CMakeLists.txt); run it the same by hand.
  REQUIRE_FALSE(heap_count_includes_thread_caches());
  const churn_result r = run_churn(o);
  INFO("before: " << r.before.to_string() << "\nafter: " << r.after.to_string());
  CHECK(r.first_failure.empty());
  CHECK(r.calls_ok == o.cycles);
  CHECK(r.leaked.empty());
  CHECK(r.after.fds == r.before.fds);
}
