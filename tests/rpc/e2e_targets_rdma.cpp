// The rdma e2e binary runs every case over rdma:// (Soft-RoCE rxe0 at 10.0.0.1 in the VM, or
// RDMARPC_TEST_RDMA_ADDR).
#include "e2e_harness.hpp"

std::vector<std::string> rdmarpc::test::e2e_targets() {
  return {"rdma"};
}
