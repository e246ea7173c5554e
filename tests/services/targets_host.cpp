// The host services binary runs every case over the in-memory loopback transport and over tcp.
#include "services_fixture.hpp"

std::vector<std::string> rdmarpc::test::e2e_targets() {
  return {"loopback", "tcp"};
}
