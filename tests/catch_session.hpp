#pragma once
// Catch2's session behind a plain function, so that only catch_impl.cpp compiles Catch2's
// implementation (Catch2 v2 declares Catch::Session only together with it).

namespace rdmarpc::test {

// Runs the tests the command line selects. `precheck`, when given, runs after the command line is
// parsed unless it only asks for a listing; a nonzero result is returned instead of running.
int run_catch_session(int argc, char* argv[], int (*precheck)() = nullptr);

}  // namespace rdmarpc::test
