// echo_client: measures echo round trips against echo_server and prints latency percentiles.
//   echo_client rdma://10.0.0.1:7472 [--count N] [--size BYTES] [--in-flight K] [--warmup N]
// Every reply is checked against its request; exit 0 only if all calls succeeded and matched.

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <rdmarpc/channel.hpp>
#include <string>
#include <vector>

#include "echo.rdmarpc.pb.h"

namespace {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

struct options {
  std::string uri;
  std::size_t count = 10'000;
  std::size_t size = 64;
  std::size_t in_flight = 1;
  std::size_t warmup = 100;
};

struct results {
  std::vector<double> micros;  // one per measured call
  std::size_t failed = 0;
  std::size_t mismatched = 0;
  std::string first_error;
};

// One of `in_flight` workers: issues calls back to back until `remaining` runs out.
asio::awaitable<void> worker(echo::Echo::Interface& client, const options& opt, std::size_t& remaining,
                             std::size_t& warmup_left, results& out, std::size_t worker_id) {
  echo::EchoRequest request;
  std::string payload(opt.size, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + (i + worker_id) % 26);
  request.set_payload(payload);
  while (remaining > 0) {
    --remaining;
    const bool measured = warmup_left == 0;
    if (!measured) --warmup_left;
    const auto start = clock_type::now();
    auto [ec, reply] = co_await client.async_echo(request, asio::as_tuple(asio::use_awaitable));
    const double micros = std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
    if (ec) {
      ++out.failed;
      if (out.first_error.empty()) out.first_error = ec.message();
      continue;
    }
    if (reply.payload() != request.payload()) ++out.mismatched;
    if (measured) out.micros.push_back(micros);
  }
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<std::size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

bool parse(int argc, char* argv[], options& opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](std::size_t& target) {
      if (i + 1 >= argc) return false;
      target = static_cast<std::size_t>(std::strtoull(argv[++i], nullptr, 10));
      return true;
    };
    if (arg == "--count") {
      if (!number(opt.count)) return false;
    } else if (arg == "--size") {
      if (!number(opt.size)) return false;
    } else if (arg == "--in-flight") {
      if (!number(opt.in_flight) || opt.in_flight == 0) return false;
    } else if (arg == "--warmup") {
      if (!number(opt.warmup)) return false;
    } else if (!arg.starts_with("-") && opt.uri.empty()) {
      opt.uri = arg;
    } else {
      return false;
    }
  }
  return !opt.uri.empty();
}

}  // namespace

int main(int argc, char* argv[]) {
  options opt;
  if (!parse(argc, argv, opt)) {
    std::cerr << "usage: echo_client URI [--count N] [--size BYTES] [--in-flight K] [--warmup N]\n";
    return 2;
  }
  try {
    asio::io_context io;
    auto channel = rdmarpc::channel::create(io.get_executor(), opt.uri);
    echo::Echo::Stub stub(channel);
    results out;
    std::size_t remaining = opt.count + opt.warmup;
    std::size_t warmup_left = opt.warmup;
    std::size_t running = opt.in_flight;
    std::printf("echo_client: %zu calls of %zu B to %s, %zu in flight (after %zu warm-up calls)\n", opt.count,
                opt.size, opt.uri.c_str(), opt.in_flight, opt.warmup);
    const auto start = clock_type::now();
    clock_type::time_point end = start;
    for (std::size_t w = 0; w < opt.in_flight; ++w) {
      asio::co_spawn(io, worker(stub, opt, remaining, warmup_left, out, w), [&](std::exception_ptr e) {
        if (e) ++out.failed;
        if (--running == 0) {
          end = clock_type::now();
          channel->close();
        }
      });
    }
    io.run_for(std::chrono::minutes(10));
    if (running != 0) {
      std::printf("echo_client: FAILED: calls still running after 10 minutes\n");
      return 1;
    }
    std::sort(out.micros.begin(), out.micros.end());
    const double seconds = std::chrono::duration<double>(end - start).count();
    double sum = 0;
    for (double m : out.micros) sum += m;
    const double mean = out.micros.empty() ? 0 : sum / static_cast<double>(out.micros.size());
    std::printf(
        "echo_client: latency (us): p50 %.1f  p90 %.1f  p99 %.1f  max %.1f  mean %.1f  (%zu measured)\n",
        percentile(out.micros, 50), percentile(out.micros, 90), percentile(out.micros, 99),
        percentile(out.micros, 100), mean, out.micros.size());
    std::printf("echo_client: %.0f calls/s; %zu failed, %zu mismatched%s%s\n",
                static_cast<double>(opt.count + opt.warmup) / seconds, out.failed, out.mismatched,
                out.first_error.empty() ? "" : "; first error: ", out.first_error.c_str());
    const bool ok = out.failed == 0 && out.mismatched == 0;
    std::printf("echo_client: %s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "echo_client: " << e.what() << "\n";
    return 1;
  }
}
