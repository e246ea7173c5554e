// cm_pingpong: rdma_cm RC send/recv ping-pong, the Soft-RoCE test bed's smoke program.
//   cm_pingpong server [-a 10.0.0.1] [-p 7471] [-n 1000] [-s 64]
//   cm_pingpong client [-a 10.0.0.1] [-p 7471] [-n 1000] [-s 64]
// Exit status: 0 all messages checked, 1 failure (reason on stderr), 2 bad command line.
#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "cm_pingpong/options.hpp"
#include "cm_pingpong/pingpong.hpp"

int main(int argc, char* argv[]) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  cm_pingpong::options opts;
  try {
    opts = cm_pingpong::parse_options(args);
  } catch (const cm_pingpong::usage_error& e) {
    std::fprintf(stderr, "cm_pingpong: %s\n%s", e.what(), cm_pingpong::usage(argv[0]).c_str());
    return 2;
  }
  if (opts.help) {
    std::fputs(cm_pingpong::usage(argv[0]).c_str(), stdout);
    return 0;
  }
  try {
    if (opts.mode == cm_pingpong::mode::server) {
      const auto report = cm_pingpong::run_server(opts, [&](std::uint16_t port) {
        // Tests wait for this line before starting the client: keep its format.
        std::printf("cm_pingpong server: listening on %s:%u\n", opts.address.c_str(), port);
        std::fflush(stdout);
      });
      std::printf("cm_pingpong server: %llu pings checked and echoed (%zu bytes each); disconnected\n",
                  static_cast<unsigned long long>(report.messages_checked), opts.size);
    } else {
      const auto report = cm_pingpong::run_client(opts);
      std::printf("cm_pingpong client: %llu round trips of %zu bytes to %s:%u, every echo checked\n",
                  static_cast<unsigned long long>(report.echoes_checked), opts.size, opts.address.c_str(),
                  opts.port);
      std::printf("cm_pingpong client: RTT %s\n", cm_pingpong::to_string(report.rtt).c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cm_pingpong %s: FAILED: %s\n",
                 opts.mode == cm_pingpong::mode::server ? "server" : "client", e.what());
    return 1;
  }
  return 0;
}
