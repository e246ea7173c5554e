#include "bench/common/client_options.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace rdmarpc::bench {
namespace {

std::uint64_t parse_count(std::string_view text) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    throw std::invalid_argument("not a count: '" + std::string(text) + "'");
  }
  return v;
}

std::chrono::nanoseconds parse_seconds(std::string_view text) {
  std::size_t used = 0;
  double s = 0;
  try {
    s = std::stod(std::string(text), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(s >= 0) || !std::isfinite(s)) {
    throw std::invalid_argument("not a number of seconds: '" + std::string(text) + "'");
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(s * 1e9));
}

}  // namespace

std::string_view arg_reader::flag() const {
  std::string_view a = argv_[index_];
  return a.substr(0, a.find('='));
}

std::string arg_reader::value() {
  std::string_view a = argv_[index_];
  const auto eq = a.find('=');
  ++index_;
  if (eq != std::string_view::npos) return std::string(a.substr(eq + 1));
  if (index_ >= argc_) throw std::invalid_argument(std::string(a) + " needs a value");
  return argv_[index_++];
}

std::uint64_t parse_size(std::string_view text) {
  std::uint64_t mult = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K': mult = 1024; break;
      case 'm':
      case 'M': mult = 1024 * 1024; break;
      default: break;
    }
  }
  if (mult != 1) text.remove_suffix(1);
  return parse_count(text) * mult;
}

std::vector<std::uint64_t> parse_size_list(std::string_view text) {
  std::vector<std::uint64_t> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    out.push_back(parse_size(text.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (out.empty()) throw std::invalid_argument("empty list");
  return out;
}

bool parse_client_flag(arg_reader& args, client_options& options) {
  const std::string_view f = args.flag();
  if (f == "--payload") {
    options.payloads = parse_size_list(args.value());
  } else if (f == "--concurrency") {
    options.concurrency = parse_size_list(args.value());
    for (auto c : options.concurrency) {
      if (c == 0) throw std::invalid_argument("--concurrency must be at least 1");
    }
  } else if (f == "--duration") {
    options.load.duration = parse_seconds(args.value());
  } else if (f == "--calls") {
    options.load.calls = parse_count(args.value());
  } else if (f == "--warmup") {
    options.load.warmup = parse_seconds(args.value());
  } else if (f == "--warmup-calls") {
    options.load.warmup_calls = parse_count(args.value());
  } else if (f == "--json") {
    options.json_path = args.value();
  } else if (f == "--stream") {
    options.stream = true;
    args.skip();
  } else if (f == "--quiet") {
    options.progress = false;
    args.skip();
  } else {
    return false;
  }
  return true;
}

std::string_view client_flags_help() noexcept {
  return "  --payload LIST       request (= reply) payload sizes, e.g. 64,4K,64K,1M (default)\n"
         "  --concurrency LIST   calls kept in flight, e.g. 1,8,64 (default)\n"
         "  --duration SECONDS   measured time per point (default 2)\n"
         "  --calls N            measure exactly N calls per point instead of a duration\n"
         "  --warmup SECONDS     warm-up time per point before measuring (default 0.5)\n"
         "  --warmup-calls N     at least N warm-up calls per point (default 0)\n"
         "  --stream             server streaming: --concurrency streams, each sending messages of\n"
         "                       --payload bytes to the client; rates are messages/s (--calls:\n"
         "                       messages)\n"
         "  --json PATH          append one JSON object per point to PATH\n"
         "  --quiet              no progress on stderr\n";
}

}  // namespace rdmarpc::bench
