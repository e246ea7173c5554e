// rdmarpc bench URI SERVICE/METHOD --json JSON --concurrency N --duration S: a closed loop keeping N
// unary calls in flight (each completion starts the next call), a progress line on stderr once a
// second, then a latency bar chart and a table (calls/s, errors, percentiles), and --output-json.
// One unmeasured call goes first: it connects, and a request the server refuses ends the run there.

#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/coded_stream.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "cli_error.hpp"
#include "commands.hpp"
#include "descriptor_source.hpp"
#include "generic_call.hpp"
#include "json_io.hpp"
#include "latency_histogram.hpp"
#include "session.hpp"
#include "wire_checked_reply.hpp"

namespace rdmarpc::cli {

namespace {

namespace gp = google::protobuf;
namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using boost::system::error_code;

// The bench's request, serialized once: every call sends the same bytes, so a DynamicMessage's
// reflection-driven serialization need not run per call.
// Only what the channel uses is real: ByteSizeLong and serialization; it is never parsed into.
class serialized_message final : public gp::MessageLite {
 public:
  explicit serialized_message(const gp::Message& m) : type_(m.GetTypeName()), bytes_(m.SerializeAsString()) {}

  std::string GetTypeName() const override { return type_; }
  gp::MessageLite* New(gp::Arena*) const override { return nullptr; }
  void Clear() override {}
  bool IsInitialized() const override { return true; }
  void CheckTypeAndMergeFrom(const gp::MessageLite&) override {}
  std::size_t ByteSizeLong() const override { return bytes_.size(); }
  int GetCachedSize() const override { return static_cast<int>(bytes_.size()); }
  const char* _InternalParse(const char*, gp::internal::ParseContext*) override { return nullptr; }
  std::uint8_t* _InternalSerialize(std::uint8_t* target, gp::io::EpsCopyOutputStream* stream) const override {
    return stream->WriteRaw(bytes_.data(), static_cast<int>(bytes_.size()), target);
  }

 private:
  std::string type_, bytes_;
};

struct bench_figures {
  latency_histogram latency;
  std::map<status_code, std::uint64_t> statuses;
  std::uint64_t calls = 0, errors = 0;
  double seconds = 0;
  std::optional<std::pair<status_code, std::string>> first_error;
};

class closed_loop {
 public:
  closed_loop(session& s, const method_ref& method, const gp::MessageLite& request)
      : session_(s), method_(method.descriptor()), request_(request), timer_(s.io()) {
    slots_.resize(s.opts().concurrency);
    for (auto& slot : slots_) {
      slot.reply = std::make_unique<wire_checked_reply>(method.method().output_type()->full_name());
      for (const auto& [key, value] : s.opts().metadata) slot.context.add_metadata(key, value);
    }
  }

  bench_figures run() {
    const auto& o = session_.opts();
    start_ = clock_type::now();
    measure_from_ = start_ + seconds(o.warmup_s);
    measure_to_ = measure_from_ + seconds(o.duration_s);
    last_progress_ = start_;
    for (auto& slot : slots_) start_call(slot);
    in_flight_ = slots_.size();
    tick();
    session_.run(wait_done());
    figures_.seconds = std::chrono::duration<double>(measure_to_ - measure_from_).count();
    if (tty_) std::cerr << "\n";
    return std::move(figures_);
  }

 private:
  struct slot {
    std::unique_ptr<wire_checked_reply> reply;
    client_context context;
    clock_type::time_point started;
  };

  static clock_type::duration seconds(double s) {
    return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
  }

  void start_call(slot& s) {
    if (session_.opts().timeout) s.context.set_timeout(*session_.opts().timeout);
    s.started = clock_type::now();
    async_generic_call(session_.channel(), method_, &s.context, request_, *s.reply,
                       [this, &s](error_code ec) { finished(s, ec); });
  }

  void finished(slot& s, error_code ec) {
    const auto now = clock_type::now();
    if (now >= measure_from_ && now <= measure_to_) {
      const auto code = to_status_code(ec);
      ++figures_.statuses[code];
      if (code == status_code::ok) {
        ++figures_.calls;
        figures_.latency.record(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - s.started).count()));
      } else {
        ++figures_.errors;
        if (!figures_.first_error) figures_.first_error.emplace(code, s.context.status_message());
      }
    }
    if (now < measure_to_) {
      start_call(s);
    } else if (--in_flight_ == 0) {
      timer_.cancel();
      drained_.cancel();
      progress();
    }
  }

  // Progress once a second (and once more at the end): elapsed, calls so far, the last interval's rate.
  void tick() {
    timer_.expires_after(std::chrono::seconds(1));
    timer_.async_wait([this](error_code ec) {
      if (ec) return;
      progress();
      if (in_flight_ > 0) tick();
    });
  }

  void progress() {
    const auto now = clock_type::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double interval = std::chrono::duration<double>(now - last_progress_).count();
    const std::uint64_t done = figures_.calls + figures_.errors;
    char line[160];
    std::snprintf(line, sizeof line, "  %6.1f s  %10llu calls  %10.0f calls/s%s", elapsed,
                  static_cast<unsigned long long>(done),
                  interval > 0 ? static_cast<double>(done - last_calls_) / interval : 0.0,
                  now < measure_from_ ? "  (warm-up)" : "");
    std::cerr << (tty_ ? "\r" : "") << line;
    if (figures_.errors > 0) std::cerr << "  " << figures_.errors << " errors";
    std::cerr << (tty_ ? "" : "\n") << std::flush;
    last_progress_ = now;
    last_calls_ = done;
  }

  // The calls run on callbacks; this waits until the last one drained (it cancels drained_).
  asio::awaitable<int> wait_done() {
    drained_.expires_at(clock_type::time_point::max());
    while (in_flight_ > 0) co_await drained_.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return 0;
  }

  session& session_;
  method_descriptor method_;
  const gp::MessageLite& request_;
  std::vector<slot> slots_;
  asio::steady_timer timer_, drained_{session_.io()};
  std::size_t in_flight_ = 0;
  bool tty_ = ::isatty(STDERR_FILENO) != 0;
  clock_type::time_point start_, measure_from_, measure_to_, last_progress_;
  std::uint64_t last_calls_ = 0;
  bench_figures figures_;
};

double us(std::uint64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void print_report(std::ostream& out, const options& o, const std::string& name, const bench_figures& f) {
  const auto& h = f.latency;
  char line[256];
  out << "\nrdmarpc bench: " << name << " on " << o.uri << ", " << o.concurrency << " in flight, "
      << f.seconds << " s measured"
      << (o.warmup_s > 0 ? " after " + std::to_string(o.warmup_s).substr(0, 4) + " s warm-up" : "")
      << "\n\nlatency histogram (microseconds: calls)\n";
  const auto bars = h.bars(10);
  std::uint64_t tallest = 1;
  for (const auto& b : bars) tallest = std::max(tallest, b.count);
  for (const auto& b : bars) {
    const auto width = static_cast<std::size_t>((b.count * 40 + tallest - 1) / tallest);  // 1 # for any call
    std::snprintf(line, sizeof line, "  %10.1f - %10.1f  %-40s %llu\n", us(b.from_ns), us(b.to_ns),
                  std::string(width, '#').c_str(), static_cast<unsigned long long>(b.count));
    out << line;
  }
  out << "\n";
  std::snprintf(line, sizeof line, "  %10s %11s %7s %9s %9s %9s %9s %9s %9s %9s\n", "calls", "calls/s",
                "errors", "min us", "mean us", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us");
  out << line;
  std::snprintf(
      line, sizeof line, "  %10llu %11.1f %7llu %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n",
      static_cast<unsigned long long>(f.calls), f.seconds > 0 ? static_cast<double>(f.calls) / f.seconds : 0,
      static_cast<unsigned long long>(f.errors), us(h.min()), h.mean() / 1000.0, us(h.percentile(0.5)),
      us(h.percentile(0.9)), us(h.percentile(0.99)), us(h.percentile(0.999)), us(h.max()));
  out << line;
  if (f.errors > 0) {
    out << "\nstatuses:";
    for (const auto& [code, n] : f.statuses) out << " " << to_string(code) << " " << n;
    out << "\n";
  }
}

std::string to_json(const options& o, const std::string& name, const bench_figures& f) {
  const auto& h = f.latency;
  std::ostringstream j;
  j.precision(10);
  j << "{\"method\":" << json_string(name) << ",\"uri\":" << json_string(o.uri)
    << ",\"concurrency\":" << o.concurrency << ",\"seconds\":" << f.seconds
    << ",\"warmup_seconds\":" << o.warmup_s << ",\"calls\":" << f.calls << ",\"errors\":" << f.errors
    << ",\"calls_per_s\":" << (f.seconds > 0 ? static_cast<double>(f.calls) / f.seconds : 0)
    << ",\"min_us\":" << us(h.min()) << ",\"mean_us\":" << h.mean() / 1000.0
    << ",\"p50_us\":" << us(h.percentile(0.5)) << ",\"p90_us\":" << us(h.percentile(0.9))
    << ",\"p99_us\":" << us(h.percentile(0.99)) << ",\"p999_us\":" << us(h.percentile(0.999))
    << ",\"max_us\":" << us(h.max()) << ",\"statuses\":{";
  bool first = true;
  for (const auto& [code, n] : f.statuses) {
    j << (first ? "" : ",") << json_string(std::string(to_string(code))) << ":" << n;
    first = false;
  }
  j << "},\"histogram\":[";
  first = true;
  for (const auto& b : h.bars(10)) {
    j << (first ? "" : ",") << "{\"from_us\":" << us(b.from_ns) << ",\"to_us\":" << us(b.to_ns)
      << ",\"count\":" << b.count << "}";
    first = false;
  }
  j << "]}";
  return j.str();
}

asio::awaitable<error_code> probe(session& s, const method_ref& method, client_context& context,
                                  const gp::Message& request, gp::Message& reply) {
  auto [ec] = co_await async_generic_call(s.channel(), method.descriptor(), &context, request, reply,
                                          asio::as_tuple(asio::use_awaitable));
  co_return ec;
}

}  // namespace

int run_bench(const options& o) {
  if (o.arguments.empty()) throw cli_error(kExitUsage, "bench needs SERVICE/METHOD and --json REQUEST");
  if (o.arguments.size() > 2)
    throw cli_error(kExitUsage, "bench takes SERVICE/METHOD and at most one JSON request");
  if (o.duration_s <= 0) throw cli_error(kExitUsage, "--duration must be more than 0 seconds");
  session s(o);
  auto source = make_descriptor_source(o, s);
  const method_ref method(find_method(*source, o.arguments[0]));
  if (method.kind() != rpc_kind::unary) {
    throw cli_error(kExitUsage, "bench calls unary methods; " + o.arguments[0] + " is a streaming method");
  }
  const std::string name = method.method().service()->full_name() + "/" + method.method().name();
  gp::DynamicMessageFactory factory(&source->pool());
  std::unique_ptr<gp::Message> request(factory.GetPrototype(method.method().input_type())->New());
  const auto texts = split_json_objects(request_text(o, 1));
  if (texts.size() != 1)
    throw cli_error(kExitBadInput, "bench sends one request (give exactly one JSON object)");
  parse_json(texts.front(), *request);
  const gp::Message& reply_prototype = *factory.GetPrototype(method.method().output_type());

  {
    client_context context;
    s.prepare(context);
    std::unique_ptr<gp::Message> reply(reply_prototype.New());
    if (const auto ec = s.run(probe(s, method, context, *request, *reply))) {
      throw s.call_failed("the first call of " + name + " (before measuring)", ec, context);
    }
  }

  const serialized_message serialized(*request);
  closed_loop loop(s, method, serialized);
  const bench_figures figures = loop.run();
  print_report(std::cout, o, name, figures);
  if (!o.output_json.empty()) {
    std::ofstream out(o.output_json, std::ios::trunc);
    out << to_json(o, name, figures) << "\n";
    if (!out) throw cli_error(kExitFailure, "cannot write " + o.output_json);
  }
  if (figures.first_error) {
    std::cerr << "rdmarpc: " << figures.errors
              << " of the measured calls failed; the first: " << to_string(figures.first_error->first) << ": "
              << figures.first_error->second << "\n";
    return exit_status_for(figures.first_error->first);
  }
  return kExitOk;
}

}  // namespace rdmarpc::cli
