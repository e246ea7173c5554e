// rdmarpc: the command-line tool for a running rdmarpc server (grpcurl- and ghz-like): list and
// describe its services, call any method with JSON, check its health, load it with a benchmark.
// `rdmarpc --help` has the usage; README ("Operate it") has examples and the exit statuses.

#include <spdlog/spdlog.h>

#include <exception>
#include <iostream>
#include <rdmarpc/log.hpp>
#include <string>

#include "cli_error.hpp"
#include "commands.hpp"
#include "options.hpp"

namespace {

using namespace rdmarpc::cli;

int dispatch(const options& o) {
  if (o.command == "list") return run_list(o);
  if (o.command == "describe") return run_describe(o);
  if (o.command == "call") return run_call(o);
  if (o.command == "health") return run_health(o);
  if (o.command == "stats") return run_stats(o);
  if (o.command == "bench") return run_bench(o);
  throw cli_error(kExitUsage,
                  "unknown command '" + o.command + "' (list, describe, call, health, stats, bench)");
}

}  // namespace

int main(int argc, char* argv[]) {
  try {
    const options o = parse_options(argc, argv);
    if (o.help) {
      std::cout << usage_text();
      return kExitOk;
    }
    // The library's log (connection events) is for -v; the tool speaks for itself otherwise.
    rdmarpc::logger()->set_level(o.verbose ? spdlog::level::debug : spdlog::level::off);
    return dispatch(o);
  } catch (const cli_error& e) {
    std::cerr << "rdmarpc: " << e.what() << "\n";
    if (e.exit_status() == kExitUsage) std::cerr << "(rdmarpc --help for usage)\n";
    return e.exit_status();
  } catch (const std::exception& e) {
    std::cerr << "rdmarpc: " << e.what() << "\n";
    return kExitFailure;
  }
}
