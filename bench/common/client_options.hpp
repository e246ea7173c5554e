#pragma once
// rdmarpc::bench::client_options: the command-line options every echo client shares (rdmarpc and
// the gRPC baseline take the very same ones, so their points are comparable), plus a small argv
// reader for the flags each program adds. Layer: bench. Threading: plain values.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/common/closed_loop.hpp"

namespace rdmarpc::bench {

struct client_options {
  std::vector<std::uint64_t> payloads{64, 4096, 65536, 1u << 20};
  std::vector<std::uint64_t> concurrency{1, 8, 64};
  load_spec load;
  // --stream: server streaming instead of echo calls. Each of `concurrency` streams delivers
  // messages of `payload` bytes (one way); the load spec's calls are then messages.
  bool stream = false;
  std::string json_path;  // append one JSON line per point here ("" = none)
  bool progress = true;   // progress on stderr (redrawn in place on a terminal)
};

// Walks argv. Flags are "--name value" or "--name=value".
class arg_reader {
 public:
  arg_reader(int argc, char** argv, int first) : argc_(argc), argv_(argv), index_(first) {}
  bool done() const noexcept { return index_ >= argc_; }
  // The current flag's name, without any "=value".
  std::string_view flag() const;
  // The current flag's value (from "=value" or the next argument); moves past it.
  // Throws std::invalid_argument when there is none.
  std::string value();
  // Moves past a flag that takes no value.
  void skip() { ++index_; }

 private:
  int argc_;
  char** argv_;
  int index_;
};

// If the reader's current flag is a shared client flag, consumes it into `options` and returns
// true. Flags: --payload LIST (bytes; K/M suffixes: 64,4K,64K,1M), --concurrency LIST,
// --duration SECONDS, --calls N, --warmup SECONDS, --warmup-calls N, --stream, --json PATH, --quiet.
// Throws std::invalid_argument on a malformed value.
bool parse_client_flag(arg_reader& args, client_options& options);

// Help text for the shared flags.
std::string_view client_flags_help() noexcept;

// "64", "4K", "1M" -> bytes; a comma-separated list of them.
std::uint64_t parse_size(std::string_view text);
std::vector<std::uint64_t> parse_size_list(std::string_view text);

}  // namespace rdmarpc::bench
