// Catch2's implementation, compiled once per build tree for every test binary; catch_main.cpp and
// rdma_main.cpp hold only their main().
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/catch_session.hpp"

namespace rdmarpc::test {

int run_catch_session(int argc, char* argv[], int (*precheck)()) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const auto& config = session.configData();
  const bool listing =
      config.listTestNamesOnly || config.listTests || config.listTags || config.listReporters;
  if (precheck != nullptr && !listing) {
    if (const int rc = precheck(); rc != 0) return rc;
  }
  return session.run();
}

}  // namespace rdmarpc::test
