#pragma once
// Command-line options of the cm_pingpong example (server or client mode) and their parser.
// Layer: examples (no rdmarpc dependency). Threading: plain values, pure functions.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cm_pingpong {

enum class mode { server, client };

struct options {
  cm_pingpong::mode mode = mode::server;
  std::string address = "10.0.0.1";          // IPv4: where the server listens / the client connects
  std::uint16_t port = 7471;                 // server: 0 picks a free port (printed when listening)
  std::uint64_t iterations = 1000;           // round trips (the server expects exactly this many)
  std::size_t size = 64;                     // bytes per message, both directions
  std::chrono::milliseconds timeout{10000};  // bound on every single wait (cm event, completion)
  bool help = false;                         // --help was given: print usage() and exit 0
};

// Thrown for malformed command lines; what() is meant for the user, followed by usage().
class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

inline constexpr std::size_t kMinSize = 8;  // the sequence number must fit
inline constexpr std::size_t kMaxSize = 1 << 20;

// args excludes the program name: {"server"|"client", "--port", "7471", ...}.
options parse_options(std::span<const std::string_view> args);
std::string usage(std::string_view program);

}  // namespace cm_pingpong
