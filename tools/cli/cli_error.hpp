#pragma once
// The rdmarpc command-line tool's exit statuses and the error it throws to end with one.
// Layer: tools/cli (a consumer of the library, not part of it). Threading: plain values.
//
// Exit statuses (README, "Operate it"):
//   0       success (health: SERVING)
//   1       anything else that went wrong in the tool (a file that cannot be read or written, a
//           reflection answer that makes no sense)
//   2       usage: bad arguments, a malformed URI
//   3       a request that does not fit the method: JSON that does not parse, a field that does not
//           exist, a value of the wrong type; a --proto file that does not compile
//   4       unknown symbol: no such service, method or message
//   5       health: the server answered, but the service is not SERVING
//   64 + N  the call (or the reflection or health call) ended with canonical status N:
//           65 CANCELLED ... 68 DEADLINE_EXCEEDED ... 76 UNIMPLEMENTED, 78 UNAVAILABLE (cannot
//           reach the server), 80 UNAUTHENTICATED

#include <rdmarpc/status.hpp>
#include <stdexcept>
#include <string>

namespace rdmarpc::cli {

enum exit_status : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,
  kExitBadInput = 3,
  kExitUnknownSymbol = 4,
  kExitNotServing = 5,
  kExitStatusBase = 64,
};

// 0 for OK, 64 + the code otherwise.
constexpr int exit_status_for(status_code code) noexcept {
  return code == status_code::ok ? kExitOk : kExitStatusBase + static_cast<int>(code);
}

// Ends the command: main() prints "rdmarpc: <what()>" on stderr and exits with exit_status().
class cli_error : public std::runtime_error {
 public:
  cli_error(int exit_status, const std::string& message)
      : std::runtime_error(message), status_(exit_status) {}
  int exit_status() const noexcept { return status_; }

 private:
  int status_;
};

}  // namespace rdmarpc::cli
