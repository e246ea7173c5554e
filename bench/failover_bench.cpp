// rdmarpc_failover_bench: how fast a channel notices a dead server, and how fast its calls move to
// a healthy one (issue 11's targets: detection <= 1 s, failover <= 1.5 s, with default settings).
//
//   rdmarpc_failover_bench detect   [--listen URI] [--runs N] [--json PATH]
//   rdmarpc_failover_bench failover [--listen URI] [--runs N] [--policy pick_first|round_robin]
//                                   [--json PATH]
//
// A hung host is played by blocking the server's only io thread: its kernel (tcp) or its NIC
// (rdma, rxe in the kernel) still acknowledges at the transport level, so only heartbeats can tell.
// detect: one server, one channel; idle (no call) and busy (8 calls in flight, no deadline). The
// time from the hang to the channel ending the connection (heartbeat timeout).
// failover: two servers, a channel over both, 16 wait_for_ready calls kept in flight; the first
// server hangs. Detection: to the failure of the calls stuck on it (they reached the wire: they
// fail UNAVAILABLE, never re-sent); failover: to the first call answered after that.
// Prints a table per run and one JSON line per run (stdout and --json). Layer: bench.

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "echo_bench.rdmarpc.pb.h"
#include "echo_service.hpp"
#include "rpc/channel.hpp"
#include "rpc/server.hpp"

namespace {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using rdmarpc::bench::EchoBench;
using rdmarpc::bench::EchoReply;
using rdmarpc::bench::EchoRequest;

double ms_since(clock_type::time_point t0, clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

// A server on its own io thread that a run can hang (block its thread) and release.
class hangable_server {
 public:
  explicit hangable_server(const std::string& uri) {
    server_.emplace(io_.get_executor());
    server_->add_service(service_);
    bound_ = server_->listen(uri).to_uri();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~hangable_server() {
    release();
    std::promise<void> done;
    asio::post(io_,
               [&] { server_->async_shutdown(std::chrono::milliseconds(100), [&] { done.set_value(); }); });
    done.get_future().wait_for(std::chrono::seconds(5));
    work_.reset();
    io_.stop();
    thread_.join();
  }
  const std::string& uri() const { return bound_; }
  // Blocks the server's thread; returns once it is blocked (the instant a hung host stops).
  clock_type::time_point hang() {
    gate_.emplace();
    std::promise<clock_type::time_point> blocked;
    asio::post(io_, [&blocked, gate = gate_->get_future().share()] {
      blocked.set_value(clock_type::now());
      gate.wait();
    });
    return blocked.get_future().get();
  }
  void release() {
    if (gate_) gate_->set_value();
    gate_.reset();
  }

 private:
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  rdmarpc::bench::callback_echo_service service_;
  std::optional<rdmarpc::server> server_;
  std::string bound_;
  std::optional<std::promise<void>> gate_;
  std::thread thread_;
};

struct settings {
  std::string mode;
  std::string uri = "tcp://127.0.0.1:0";
  int runs = 3;
  rdmarpc::load_balancing_policy policy = rdmarpc::load_balancing_policy::round_robin;
  std::string json_path;
};

void emit(const settings& s, const std::string& line) {
  std::cout << line << std::endl;
  if (!s.json_path.empty()) std::ofstream(s.json_path, std::ios::app) << line << "\n";
}

std::string transport_of(const std::string& uri) {
  return uri.substr(0, uri.find("://"));
}

// Runs `io` until `done()` or `limit` passes.
template <class Done>
bool run_until(asio::io_context& io, Done done, clock_type::duration limit) {
  const auto until = clock_type::now() + limit;
  auto work = asio::make_work_guard(io);
  while (!done()) {
    if (clock_type::now() >= until) return false;
    io.restart();
    io.run_one_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Keeps `depth` echo calls in flight; records when calls fail and succeed.
struct call_loop {
  EchoBench::Stub& stub;
  int depth;
  bool wait_for_ready = false;
  bool stopped = false;
  int in_flight = 0, ok = 0, failed = 0;
  clock_type::time_point last_failure{};
  std::optional<clock_type::time_point> ok_after_failure;  // the first answer after the last failure
  EchoRequest request;

  void start() {
    request.set_payload(std::string(64, 'x'));
    for (int i = 0; i < depth; ++i) next();
  }
  void next() {
    if (stopped) return;
    ++in_flight;
    auto ctx = std::make_shared<rdmarpc::client_context>();
    ctx->set_wait_for_ready(wait_for_ready);
    stub.async_echo(*ctx, request, [this, ctx](boost::system::error_code ec, EchoReply) {
      --in_flight;
      if (ec) {
        ++failed;
        last_failure = clock_type::now();
        ok_after_failure.reset();
      } else {
        ++ok;
        if (failed > 0 && !ok_after_failure) ok_after_failure = clock_type::now();
      }
      next();
    });
  }
};

int run_detect(const settings& s) {
  std::printf("%-8s %-5s %4s %14s %s\n", "transport", "load", "run", "detected_ms", "note");
  for (const bool busy : {false, true}) {
    for (int run = 0; run < s.runs; ++run) {
      hangable_server server(s.uri);
      asio::io_context io(1);
      auto ch = rdmarpc::channel::create(io.get_executor(), server.uri());
      EchoBench::Stub stub(ch);
      call_loop loop{stub, busy ? 8 : 0};
      // Connected, and a call answered.
      loop.depth = 1;
      loop.start();
      run_until(
          io, [&] { return loop.ok >= 1; }, std::chrono::seconds(30));
      loop.stopped = !busy;
      if (busy) {
        loop.depth = 7;
        loop.start();  // 8 in flight from now on
        run_until(
            io, [&] { return loop.ok >= 100; }, std::chrono::seconds(30));
      } else {
        run_until(
            io, [&] { return loop.in_flight == 0; }, std::chrono::seconds(30));
      }
      const auto t0 = server.hang();
      const bool seen = run_until(
          io, [&] { return ch->stats().heartbeat_timeouts > 0; }, std::chrono::seconds(10));
      const double ms = ms_since(t0, clock_type::now());
      loop.stopped = true;
      server.release();
      std::printf("%-8s %-5s %4d %14.1f %s\n", transport_of(s.uri).c_str(), busy ? "busy" : "idle", run,
                  seen ? ms : -1.0, seen ? "" : "NOT DETECTED within 10 s");
      char line[256];
      std::snprintf(line, sizeof line,
                    "{\"kind\":\"detect\",\"transport\":\"%s\",\"load\":\"%s\",\"run\":%d,\"detected\":%s,"
                    "\"detected_ms\":%.1f}",
                    transport_of(s.uri).c_str(), busy ? "busy" : "idle", run, seen ? "true" : "false", ms);
      emit(s, line);
      ch->close();
      run_until(
          io, [&] { return loop.in_flight == 0; }, std::chrono::seconds(10));
    }
  }
  return 0;
}

int run_failover(const settings& s) {
  const char* policy = s.policy == rdmarpc::load_balancing_policy::pick_first ? "pick_first" : "round_robin";
  std::printf("%-8s %-11s %4s %12s %12s %8s %8s %6s\n", "transport", "policy", "run", "detect_ms",
              "failover_ms", "ok", "failed", "hung");
  for (int run = 0; run < s.runs; ++run) {
    hangable_server a(s.uri), b(s.uri);
    asio::io_context io(1);
    rdmarpc::channel_options options;
    options.load_balancing = s.policy;
    const auto host_port = [](const std::string& uri) { return uri.substr(uri.find("://") + 3); };
    auto ch = rdmarpc::channel::create(io.get_executor(), a.uri() + "," + host_port(b.uri()), options);
    EchoBench::Stub stub(ch);
    call_loop loop{stub, 16, /*wait_for_ready=*/true};
    loop.start();
    run_until(
        io, [&] { return loop.ok >= 500; }, std::chrono::seconds(30));
    // Hang the endpoint the calls are on (pick_first: the first; round_robin: either).
    const auto t0 = a.hang();
    const int ok_before = loop.ok;
    // Failed over once the calls stuck on `a` failed and calls flow again.
    const bool recovered = run_until(
        io,
        [&] {
          return ch->stats().heartbeat_timeouts > 0 && loop.ok_after_failure && loop.ok > ok_before + 100;
        },
        std::chrono::seconds(10));
    const double detect_ms = loop.failed > 0 ? ms_since(t0, loop.last_failure) : -1;
    // The first answer after the last failure: when calls flow again.
    const double failover_ms = recovered ? ms_since(t0, *loop.ok_after_failure) : -1;
    loop.stopped = true;
    a.release();
    run_until(
        io, [&] { return loop.in_flight == 0; }, std::chrono::seconds(10));
    const int hung = loop.in_flight;
    std::printf("%-8s %-11s %4d %12.1f %12.1f %8d %8d %6d%s\n", transport_of(s.uri).c_str(), policy, run,
                detect_ms, failover_ms, loop.ok, loop.failed, hung,
                recovered ? "" : "  NOT RECOVERED within 10 s");
    char line[320];
    std::snprintf(line, sizeof line,
                  "{\"kind\":\"failover\",\"transport\":\"%s\",\"policy\":\"%s\",\"run\":%d,\"recovered\":%s,"
                  "\"detect_ms\":%.1f,\"failover_ms\":%.1f,\"ok\":%d,\"failed\":%d,\"hung\":%d}",
                  transport_of(s.uri).c_str(), policy, run, recovered ? "true" : "false", detect_ms,
                  failover_ms, loop.ok, loop.failed, hung);
    emit(s, line);
    ch->close();
    run_until(
        io, [] { return false; }, std::chrono::milliseconds(100));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: rdmarpc_failover_bench detect|failover [--listen URI] [--runs N] "
                 "[--policy pick_first|round_robin] [--json PATH]\n";
    return 2;
  }
  settings s;
  s.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "missing value for " << f << "\n";
      return 2;
    }
    const std::string v = argv[++i];
    if (f == "--listen") {
      s.uri = v;
    } else if (f == "--runs") {
      s.runs = std::stoi(v);
    } else if (f == "--json") {
      s.json_path = v;
    } else if (f == "--policy") {
      if (v != "pick_first" && v != "round_robin") {
        std::cerr << "--policy is pick_first or round_robin\n";
        return 2;
      }
      s.policy = v == "pick_first" ? rdmarpc::load_balancing_policy::pick_first
                                   : rdmarpc::load_balancing_policy::round_robin;
    } else {
      std::cerr << "unknown flag " << f << "\n";
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::err);  // the heartbeat warnings are what we provoke
  if (s.mode == "detect") return run_detect(s);
  if (s.mode == "failover") return run_failover(s);
  std::cerr << "unknown mode " << s.mode << "\n";
  return 2;
}
