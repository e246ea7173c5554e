#include "cm_pingpong/options.hpp"

#include <charconv>
#include <limits>

namespace cm_pingpong {
namespace {

template <typename T>
T parse_number(std::string_view flag, std::string_view text, T min, T max) {
  T value{};
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end || value < min || value > max) {
    throw usage_error(std::string(flag) + " wants a number in [" + std::to_string(min) + ", " +
                      std::to_string(max) + "], got '" + std::string(text) + "'");
  }
  return value;
}

}  // namespace

options parse_options(std::span<const std::string_view> args) {
  options opts;
  bool mode_seen = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") {
      opts.help = true;
      return opts;
    }
    if (!arg.starts_with("-")) {
      if (mode_seen) throw usage_error("unexpected argument '" + std::string(arg) + "'");
      if (arg == "server") {
        opts.mode = mode::server;
      } else if (arg == "client") {
        opts.mode = mode::client;
      } else {
        throw usage_error("mode must be 'server' or 'client', got '" + std::string(arg) + "'");
      }
      mode_seen = true;
      continue;
    }
    if (i + 1 >= args.size()) throw usage_error(std::string(arg) + " needs a value");
    const std::string_view value = args[++i];
    if (arg == "-a" || arg == "--address") {
      if (value.empty()) throw usage_error("--address must not be empty");
      opts.address = std::string(value);
    } else if (arg == "-p" || arg == "--port") {
      opts.port = parse_number<std::uint16_t>(arg, value, 0, std::numeric_limits<std::uint16_t>::max());
    } else if (arg == "-n" || arg == "--iterations") {
      opts.iterations = parse_number<std::uint64_t>(arg, value, 1, 1'000'000'000);
    } else if (arg == "-s" || arg == "--size") {
      opts.size = parse_number<std::size_t>(arg, value, kMinSize, kMaxSize);
    } else if (arg == "-t" || arg == "--timeout-ms") {
      opts.timeout = std::chrono::milliseconds(parse_number<std::int64_t>(arg, value, 1, 3'600'000));
    } else {
      throw usage_error("unknown option '" + std::string(arg) + "'");
    }
  }
  if (!mode_seen) throw usage_error("missing mode: 'server' or 'client'");
  // A client cannot connect to "any port"; only a listener may ask for one.
  if (opts.mode == mode::client && opts.port == 0) throw usage_error("the client needs a non-zero --port");
  return opts;
}

std::string usage(std::string_view program) {
  std::string text = "usage: ";
  text += program;
  text +=
      " server|client [options]\n"
      "  An rdma_cm RC send/recv ping-pong: the client sends N messages, the server checks each\n"
      "  one and echoes it, the client checks every echo and reports round-trip times.\n"
      "options:\n"
      "  -a, --address IPV4     server: address to listen on; client: server to connect to\n"
      "                         (default 10.0.0.1, the rxe0 address in the Soft-RoCE VM)\n"
      "  -p, --port N           rdma_cm port (default 7471; server: 0 picks a free one)\n"
      "  -n, --iterations N     round trips (default 1000; both sides must agree)\n"
      "  -s, --size BYTES       message size, 8..1048576 (default 64; both sides must agree)\n"
      "  -t, --timeout-ms MS    limit on every single wait (default 10000)\n"
      "  -h, --help             this text\n";
  return text;
}

}  // namespace cm_pingpong
