// The host e2e binary runs every case over the in-memory loopback transport and over tcp.
#include "e2e_harness.hpp"

std::vector<std::string> rdmarpc::test::e2e_targets() {
  return {"loopback", "tcp"};
}
