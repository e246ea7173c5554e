// main() for test binaries that need a real RDMA device (CTest label `rdma`).
// Without a device this is a skipped test and says so loudly (exit 77 = CTest "Skipped"); the
// test scripts count skipped rdma tests as a failure of the VM run. Catch2's implementation is
// catch_impl.cpp.
#include <infiniband/verbs.h>

#include <cstdio>

#include "tests/catch_session.hpp"

namespace {

int require_device() {
  int devices = 0;
  ibv_device** list = ibv_get_device_list(&devices);
  if (list != nullptr) ibv_free_device_list(list);
  if (devices > 0) return 0;
  std::fprintf(stderr,
               "\n*** SKIPPED: no RDMA device found (ibv_get_device_list returned none). ***\n"
               "*** This rdma-labelled test did NOT run. Run it inside the Soft-RoCE VM: ***\n"
               "***   tools/rxe-vm/run-in-vm.sh build -- ctest -L rdma                   ***\n\n");
  return 77;
}

}  // namespace

int main(int argc, char* argv[]) {
  return rdmarpc::test::run_catch_session(argc, argv, require_device);
}
