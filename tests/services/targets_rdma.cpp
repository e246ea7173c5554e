// The rdma services binary runs every case over rdma:// (Soft-RoCE rxe0 at 10.0.0.1 in the VM, or
// RDMARPC_TEST_RDMA_ADDR).
#include "services_fixture.hpp"

std::vector<std::string> rdmarpc::test::e2e_targets() {
  return {"rdma"};
}
