#pragma once
// The rdmarpc tool's command line: one options struct every command reads, parsed from argv
// (flags may appear anywhere), and the usage text. Layer: tools/cli. Threading: plain values.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdmarpc::cli {

struct options {
  std::string command;                   // list, describe, call, health, bench
  std::string uri;                       // the server
  std::vector<std::string> arguments;    // what follows the URI (method, JSON, symbol, service)
  std::vector<std::string> proto_files;  // --proto: descriptors from files, not reflection
  std::vector<std::string> import_dirs;  // -I
  std::vector<std::pair<std::string, std::string>> metadata;   // --metadata k=v
  std::optional<std::chrono::steady_clock::duration> timeout;  // --timeout: each call's deadline
  // --heartbeat-timeout: how long the server may take to answer a heartbeat (channel_options)
  std::optional<std::chrono::steady_clock::duration> heartbeat_timeout;
  std::optional<std::string> data;  // -d: JSON text, @FILE or @- (stdin)
  bool emit_defaults = false;
  bool verbose = false;
  bool help = false;
  // bench
  std::size_t concurrency = 1;
  double duration_s = 10;
  double warmup_s = 0;
  std::string output_json;
};

// Throws cli_error(kExitUsage) with what is wrong.
options parse_options(int argc, char** argv);

std::string_view usage_text() noexcept;

// "1.5" seconds -> a duration; throws cli_error(kExitUsage) naming `flag`.
double parse_seconds(std::string_view flag, std::string_view text);

}  // namespace rdmarpc::cli
