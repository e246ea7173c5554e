// Churn over rdma on the VM's rxe0: connect, call, disconnect, many times; the device must end
// holding the QPs, MRs, CQs, PDs and rdma_cm ids it held before, and the process its fds and heap.
// (Device-wide counts: in the test VM this binary is rxe0's only user while it runs.)
#include <catch2/catch.hpp>
#include <cstdlib>

#include "churn.hpp"

using namespace rdmarpc::soak;

TEST_CASE("rdma churn: 200 connect/call/disconnect cycles leak no QP, MR, fd or heap", "[soak][rdma]") {
  churn_options o;
  o.target = "rdma";
  const char* addr = std::getenv("RDMARPC_TEST_RDMA_ADDR");
  o.address = addr != nullptr ? addr : "10.0.0.1";
  o.cycles = 200;
  o.warmup_cycles = churn_options::kRdmaWarmupCycles;
  // The heap check is exact only without glibc's thread caches: ctest runs this binary with
  // GLIBC_TUNABLES=glibc.malloc.tcache_count=0 (tests/soak/CMakeLists.txt); run it the same by hand.
  REQUIRE_FALSE(heap_count_includes_thread_caches());
  const churn_result r = run_churn(o);
  INFO("before: " << r.before.to_string() << "\nafter: " << r.after.to_string());
  // Without the rdma tool's counts the QP/MR half of the check did not happen: fail loudly.
  REQUIRE(r.before.rdma.count("qp") == 1);
  REQUIRE(r.before.rdma.count("mr") == 1);
  CHECK(r.first_failure.empty());
  CHECK(r.calls_ok == o.cycles);
  CHECK(r.leaked.empty());
  CHECK(r.after.rdma == r.before.rdma);
}
