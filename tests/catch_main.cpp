// main() for the host test binaries (Catch2's implementation is catch_impl.cpp).
#include "tests/catch_session.hpp"

int main(int argc, char* argv[]) {
  return rdmarpc::test::run_catch_session(argc, argv);
}
