// rdmarpc_soak: the soak with faults (issue 12). Two roles:
//   rdmarpc_soak server --listen URI [--threads N] [--ready-fd FD] [--name NAME]
//     serves tests/rpc/test_service until SIGTERM/SIGINT (then shuts down gracefully, exit 0);
//     writes "ready" to FD once it listens.
//   rdmarpc_soak run [--target tcp|rdma] [--seconds N] [--servers K] ... (--help)
//     starts K server processes of itself on fixed endpoints, drives mixed load from several
//     round_robin channels over all of them, SIGKILLs and restarts (or SIGSTOPs and SIGCONTs) one
//     server every --fault-interval seconds, samples each server's RSS, and prints a progress line
//     while running and a table at the end (JSON with --json). Exit 0 only when no call hung,
//     completed past its deadline + margin or got a wrong reply, no server died unasked, every
//     server shut down cleanly at the end, some calls succeeded and at least --min-kills kills
//     happened. tests/soak/README.md says more.
//     In the multi-host bed (--agent): servers on host 2 too, started by its agent, in the same
//     channels, and every --cut-every'th fault cuts host 2's link for --cut-ms.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "io_thread.hpp"
#include "mixed_load.hpp"
#include "resource_counts.hpp"
#include "rpc/channel.hpp"
#include "rpc/server.hpp"
#include "server_fleet.hpp"
#include "test_service.hpp"
#include "testbed/agent.rdmarpc.pb.h"

namespace {

using namespace rdmarpc::soak;
using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---- server role

int run_server(int argc, char** argv) {
  std::string uri;
  std::size_t threads = 1;
  int ready_fd = -1;
  std::string name;  // test_service::name: which server answered, for the multi-host tests
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--listen" && has_value) {
      uri = argv[++i];
    } else if (arg == "--threads" && has_value) {
      threads = std::stoul(argv[++i]);
    } else if (arg == "--ready-fd" && has_value) {
      ready_fd = std::stoi(argv[++i]);
    } else if (arg == "--name" && has_value) {
      name = argv[++i];
    } else {
      std::cerr << "usage: rdmarpc_soak server --listen URI [--threads N] [--ready-fd FD] [--name NAME]\n";
      return 2;
    }
  }
  if (uri.empty()) {
    std::cerr << "rdmarpc_soak server: --listen URI is required\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  boost::asio::io_context io(1);
  rdmarpc::test::test_service service;  // outlives the server
  service.name = name;
  rdmarpc::server_options options;
  options.threads = threads;
  rdmarpc::server server(io.get_executor(), options);
  server.add_service(service);
  const auto bound = server.listen(uri);
  std::cerr << "rdmarpc_soak server: listening on " << bound.to_uri() << std::endl;
  if (ready_fd >= 0) {
    const std::string line = "ready " + bound.to_uri() + "\n";
    [[maybe_unused]] const auto n = ::write(ready_fd, line.data(), line.size());
    ::close(ready_fd);
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code, int) {
    server.async_shutdown(std::chrono::seconds(1), [&] { io.stop(); });
  });
  io.run();
  return 0;
}

// ---- run role

struct run_options {
  std::string target = "tcp";
  std::string address;  // default: 127.0.0.1 for tcp, 10.0.0.1 (the VM's rxe0) for rdma
  double seconds = 60;
  std::size_t servers = 3;
  unsigned base_port = 0;  // 0: free ports below the ephemeral range, picked at start
  std::size_t server_threads = 1;
  double fault_interval = 5;  // seconds between faults; 0: none
  milliseconds restart_delay{1000};
  milliseconds stop_time{2000};
  unsigned stop_every = 3;  // every Nth fault is a SIGSTOP/SIGCONT instead of a kill; 0: never
  bool kill_first = false;  // by default server 0 is never killed: its memory shows the whole run
  double sample_interval = 5;
  unsigned min_kills = 0;
  // The multi-host bed: host 2's agent (tcp://10.0.0.2:7400), the servers it runs in the load too,
  // and how often a fault is a cut of host 2's link instead (every Nth; needs the agent).
  std::string agent;
  std::vector<std::string> remote_servers;
  unsigned cut_every = 0;
  milliseconds cut_time{1500};
  bool cut_silent = false;  // tc netem loss 100% (silence) instead of ip link down
  std::string json_path;
  std::string log_dir = "rdmarpc-soak-logs";
  std::string log_level = "err";
  load_options load;
};

void usage() {
  std::cerr <<
      R"(usage: rdmarpc_soak run [options]
  --target tcp|rdma        transport (tcp)
  --address ADDR           servers' address (127.0.0.1; rdma: 10.0.0.1)
  --seconds N              how long the load runs (60)
  --servers K              server processes (3)
  --base-port P            servers on P..P+K-1 (0: free ports below the ephemeral range)
  --server-threads N       server_options::threads of each server (1)
  --channels N             client channels, each over all servers, round_robin (8)
  --calls-per-channel N    closed loops per channel (4)
  --client-threads N       client io threads (2)
  --large-bytes N          the large messages (1048576)
  --large-percent P        share of calls carrying a large message (5)
  --wait-for-ready-percent P  share of calls with wait_for_ready (25)
  --deadline-ms MS         small unary calls' deadline (2000)
  --large-deadline-ms MS   large calls' and streams' deadline (5000)
  --margin-ms MS           completion past the deadline tolerated (1000)
  --fault-interval S       a fault every S seconds, 0 for none (5)
  --restart-delay-ms MS    a killed server is restarted after this (1000)
  --stop-ms MS             a SIGSTOPped server is resumed after this (2000)
  --stop-every N           every Nth fault is SIGSTOP/SIGCONT, not SIGKILL; 0: never (3)
  --kill-first             kill server 0 too (by default it only gets stopped, so its memory spans the run)
  --sample-interval S      RSS samples and progress lines every S seconds (5)
  --min-kills N            fail unless at least N kills happened (0)
  --agent URI              the multi-host bed's agent on host 2 (tcp://10.0.0.2:7400)
  --remote-servers LIST    servers the agent starts on host 2, in the load too (rdma://10.0.0.2:7471,...)
  --cut-every N            every Nth fault cuts host 2's link instead (needs --agent); 0: never (0)
  --cut-ms MS              how long a cut lasts (1500)
  --cut-silent             cut with tc netem loss 100% (no link event) instead of ip link down
  --seed N                 load's random seed (1)
  --json FILE              write the result as JSON
  --log-dir DIR            servers' logs, server-<i>.log (rdmarpc-soak-logs)
  --log-level LEVEL        the client's spdlog level (err)
)";
}

bool parse_run(int argc, char** argv, run_options& o) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    auto next = [&] { return std::string(argv[++i]); };
    auto ms = [&] { return milliseconds(std::stol(argv[++i])); };
    if (arg == "--kill-first") {
      o.kill_first = true;
    } else if (arg == "--cut-silent") {
      o.cut_silent = true;
    } else if (!has_value) {
      return false;
    } else if (arg == "--target") {
      o.target = next();
    } else if (arg == "--address") {
      o.address = next();
    } else if (arg == "--seconds") {
      o.seconds = std::stod(next());
    } else if (arg == "--servers") {
      o.servers = std::stoul(next());
    } else if (arg == "--base-port") {
      o.base_port = static_cast<unsigned>(std::stoul(next()));
    } else if (arg == "--server-threads") {
      o.server_threads = std::stoul(next());
    } else if (arg == "--channels") {
      o.load.channels = std::stoul(next());
    } else if (arg == "--calls-per-channel") {
      o.load.calls_per_channel = std::stoul(next());
    } else if (arg == "--client-threads") {
      o.load.client_threads = std::stoul(next());
    } else if (arg == "--large-bytes") {
      o.load.large_bytes = std::stoul(next());
    } else if (arg == "--large-percent") {
      o.load.large_percent = static_cast<unsigned>(std::stoul(next()));
    } else if (arg == "--wait-for-ready-percent") {
      o.load.wait_for_ready_percent = static_cast<unsigned>(std::stoul(next()));
    } else if (arg == "--deadline-ms") {
      o.load.deadline = ms();
    } else if (arg == "--large-deadline-ms") {
      o.load.large_deadline = ms();
    } else if (arg == "--margin-ms") {
      o.load.margin = ms();
    } else if (arg == "--fault-interval") {
      o.fault_interval = std::stod(next());
    } else if (arg == "--restart-delay-ms") {
      o.restart_delay = ms();
    } else if (arg == "--stop-ms") {
      o.stop_time = ms();
    } else if (arg == "--stop-every") {
      o.stop_every = static_cast<unsigned>(std::stoul(next()));
    } else if (arg == "--sample-interval") {
      o.sample_interval = std::stod(next());
    } else if (arg == "--min-kills") {
      o.min_kills = static_cast<unsigned>(std::stoul(next()));
    } else if (arg == "--agent") {
      o.agent = next();
    } else if (arg == "--remote-servers") {
      std::stringstream list(next());
      for (std::string uri; std::getline(list, uri, ',');)
        if (!uri.empty()) o.remote_servers.push_back(uri);
    } else if (arg == "--cut-every") {
      o.cut_every = static_cast<unsigned>(std::stoul(next()));
    } else if (arg == "--cut-ms") {
      o.cut_time = ms();
    } else if (arg == "--seed") {
      o.load.seed = std::stoull(next());
    } else if (arg == "--json") {
      o.json_path = next();
    } else if (arg == "--log-dir") {
      o.log_dir = next();
    } else if (arg == "--log-level") {
      o.log_level = next();
    } else {
      return false;
    }
  }
  if (o.target != "tcp" && o.target != "rdma") return false;
  if (o.address.empty()) o.address = o.target == "rdma" ? "10.0.0.1" : "127.0.0.1";
  if ((o.cut_every > 0 || !o.remote_servers.empty()) && o.agent.empty()) return false;
  return o.servers > 0 && o.seconds > 0 && o.sample_interval > 0;
}

// Host 2's agent in the multi-host bed (tests/multihost): calls that block the fault loop's thread
// until it answers (wait_for_ready: it may be booting, or its link coming back from a cut). Its
// channel lives on a thread of its own, which answers the agent's heartbeats between calls.
class remote_agent {
 public:
  explicit remote_agent(const std::string& uri)
      : channel_(rdmarpc::channel::create(io_.executor(), uri, options())), agent_(channel_) {}
  ~remote_agent() { channel_->close(); }
  remote_agent(const remote_agent&) = delete;
  remote_agent& operator=(const remote_agent&) = delete;

  void start_server(const std::string& uri) {
    call("StartServer " + uri,
         [&](auto& ctx, auto done) { agent_.async_start_server(ctx, ref(uri), std::move(done)); });
  }
  // A graceful shutdown; throws unless the server exited 0.
  void terminate_server(const std::string& uri) {
    call("TerminateServer " + uri,
         [&](auto& ctx, auto done) { agent_.async_terminate_server(ctx, ref(uri), std::move(done)); });
  }
  // Answers, then cuts 200 ms later for `how_long`.
  void cut_link(milliseconds how_long, bool silent) {
    rdmarpc::testbed::LinkCut cut;
    cut.set_milliseconds(static_cast<std::uint32_t>(how_long.count()));
    cut.set_silent(silent);
    call("CutLink", [&](auto& ctx, auto done) { agent_.async_cut_link(ctx, cut, std::move(done)); });
  }

 private:
  // The agent answers from one thread that blocks while a server starts or stops (seconds under
  // TCG): slow heartbeats, so its channel does not take that for a dead host.
  static rdmarpc::channel_options options() {
    rdmarpc::channel_options o;
    o.heartbeat_interval = std::chrono::seconds(10);
    o.heartbeat_timeout = std::chrono::seconds(10);
    return o;
  }
  static rdmarpc::testbed::ServerRef ref(const std::string& uri) {
    rdmarpc::testbed::ServerRef r;
    r.set_uri(uri);
    return r;
  }
  template <typename Start>
  void call(const std::string& what, Start start) {
    auto ctx = std::make_shared<rdmarpc::client_context>();
    ctx->set_wait_for_ready(true);
    ctx->set_timeout(std::chrono::seconds(60));
    std::promise<boost::system::error_code> answered;
    auto result = answered.get_future();
    start(*ctx,
          [ctx, &answered](boost::system::error_code ec, rdmarpc::testbed::Ack) { answered.set_value(ec); });
    const auto ec = result.get();  // the deadline above bounds the wait
    if (ec) {
      throw std::runtime_error("agent " + what + ": " + ec.message() +
                               (ctx->status_message().empty() ? "" : " (" + ctx->status_message() + ")"));
    }
  }

  io_thread io_;  // destroyed last: the channel's teardown runs there
  std::shared_ptr<rdmarpc::channel> channel_;
  rdmarpc::testbed::Agent::Stub agent_;
};

// K ports free on `address` now, below the ephemeral range: while a server is down no client
// connection may take its port as a local one (its restart would fail EADDRINUSE, or a connect to
// it could connect the socket to itself). Held open together so they differ, then released.
std::vector<unsigned> free_ports(const std::string& address, std::size_t k) {
  unsigned ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const unsigned low = 10000, high = std::max(ephemeral_low, low + 1000);
  std::mt19937 rng(static_cast<unsigned>(::getpid()) ^
                   static_cast<unsigned>(clock::now().time_since_epoch().count()));
  std::vector<int> fds;
  std::vector<unsigned> ports;
  for (int attempt = 0; attempt < 1000 && ports.size() < k; ++attempt) {
    const unsigned port = std::uniform_int_distribution<unsigned>(low, high - 1)(rng);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) {
      ::close(fd);
      break;
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      continue;
    }
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (int f : fds) ::close(f);
  if (ports.size() < k)
    throw std::runtime_error("cannot find " + std::to_string(k) + " free ports on " + address);
  return ports;
}

std::string self_exe() {
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

double seconds_since(clock::time_point t0, clock::time_point t = clock::now()) {
  return std::chrono::duration<double>(t - t0).count();
}

std::string mib(std::optional<std::size_t> bytes) {
  if (!bytes) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(*bytes) / (1024.0 * 1024.0));
  return buf;
}

struct sample {
  double t = 0;
  struct one {
    int pid = 0;  // 0: not running (killed, waiting for its restart)
    double uptime = 0;
    std::optional<std::size_t> rss, fds;
    bool stopped = false;
  };
  std::vector<one> servers;
  std::optional<std::size_t> client_rss, client_fds;
};

struct fault_counts {
  unsigned kills = 0, restarts = 0, stops = 0, link_cuts = 0;
};

std::string failed_by_status(const load_counts& c) {
  std::string s;
  for (const auto& [code, n] : c.failed) s += (s.empty() ? "" : ", ") + code + " " + std::to_string(n);
  return s.empty() ? "none" : s;
}

void print_progress(const sample& s, const load_counts& c, const fault_counts& f) {
  std::printf(
      "[%6.0fs] calls %llu ok %llu failed %llu (%s) wrong %llu late %llu hung %llu | kills %u stops %u cuts "
      "%u "
      "| RSS MiB",
      s.t, static_cast<unsigned long long>(c.started), static_cast<unsigned long long>(c.ok),
      static_cast<unsigned long long>(c.failed_total()), failed_by_status(c).c_str(),
      static_cast<unsigned long long>(c.wrong), static_cast<unsigned long long>(c.late),
      static_cast<unsigned long long>(c.hung), f.kills, f.stops, f.link_cuts);
  for (std::size_t i = 0; i < s.servers.size(); ++i)
    std::printf(" s%zu %s%s", i, s.servers[i].pid ? mib(s.servers[i].rss).c_str() : "down",
                s.servers[i].stopped ? "(stopped)" : "");
  std::printf(" client %s\n", mib(s.client_rss).c_str());
  std::fflush(stdout);
}

std::string opt_json(std::optional<std::size_t> v) {
  return v ? std::to_string(*v) : "null";
}

std::string to_json(const run_options& o, double seconds, const load_counts& c, const fault_counts& f,
                    const rdmarpc::channel_stats& ch, const std::vector<sample>& samples,
                    const std::vector<std::string>& server_problems,
                    const std::vector<std::string>& failures) {
  std::ostringstream j;
  j << "{\"target\": " << json_string(o.target) << ", \"seconds\": " << seconds
    << ", \"servers\": " << o.servers << ", \"channels\": " << o.load.channels
    << ", \"calls_per_channel\": " << o.load.calls_per_channel << ", \"large_bytes\": " << o.load.large_bytes
    << ", \"deadline_ms\": " << o.load.deadline.count()
    << ", \"large_deadline_ms\": " << o.load.large_deadline.count()
    << ", \"margin_ms\": " << o.load.margin.count() << ",\n \"calls\": {\"started\": " << c.started
    << ", \"ok\": " << c.ok << ", \"failed\": " << c.failed_total() << ", \"wrong\": " << c.wrong
    << ", \"late\": " << c.late << ", \"hung\": " << c.hung << ", \"in_flight\": " << c.in_flight
    << ", \"max_overrun_ms\": " << (c.max_overrun_ms ? std::to_string(*c.max_overrun_ms) : "null")
    << ", \"failed_by_status\": {";
  bool first = true;
  for (const auto& [code, n] : c.failed) {
    j << (first ? "" : ", ") << json_string(code) << ": " << n;
    first = false;
  }
  j << "}, \"by_kind\": {";
  for (std::size_t k = 0; k < kCallKinds; ++k) {
    const auto& pk = c.kinds[k];
    j << (k ? ", " : "") << json_string(std::string(to_string(static_cast<call_kind>(k))))
      << ": {\"started\": " << pk.started << ", \"ok\": " << pk.ok << ", \"failed\": " << pk.failed << "}";
  }
  j << "}},\n \"channels\": {\"connects\": " << ch.connects
    << ", \"connect_failures\": " << ch.connect_failures << ", \"disconnects\": " << ch.disconnects
    << ", \"heartbeat_timeouts\": " << ch.heartbeat_timeouts << ", \"going_aways\": " << ch.going_aways
    << "},\n \"faults\": {\"kills\": " << f.kills << ", \"restarts\": " << f.restarts
    << ", \"stops\": " << f.stops << ", \"link_cuts\": " << f.link_cuts << "},\n \"problems\": [";
  for (std::size_t i = 0; i < c.first_problems.size(); ++i)
    j << (i ? ", " : "") << json_string(c.first_problems[i]);
  j << "],\n \"server_problems\": [";
  for (std::size_t i = 0; i < server_problems.size(); ++i)
    j << (i ? ", " : "") << json_string(server_problems[i]);
  j << "],\n \"samples\": [";
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    j << (i ? ",\n  " : "\n  ") << "{\"t\": " << s.t << ", \"client_rss\": " << opt_json(s.client_rss)
      << ", \"client_fds\": " << opt_json(s.client_fds) << ", \"servers\": [";
    for (std::size_t k = 0; k < s.servers.size(); ++k) {
      const auto& v = s.servers[k];
      j << (k ? ", " : "") << "{\"pid\": " << v.pid << ", \"uptime\": " << v.uptime
        << ", \"rss\": " << opt_json(v.rss) << ", \"fds\": " << opt_json(v.fds)
        << ", \"stopped\": " << (v.stopped ? "true" : "false") << "}";
    }
    j << "]}";
  }
  j << "],\n \"failures\": [";
  for (std::size_t i = 0; i < failures.size(); ++i) j << (i ? ", " : "") << json_string(failures[i]);
  j << "], \"ok\": " << (failures.empty() ? "true" : "false") << "}\n";
  return j.str();
}

void print_table(const run_options& o, double seconds, const load_counts& c, const fault_counts& f,
                 const rdmarpc::channel_stats& ch, const std::vector<sample>& samples,
                 const std::vector<std::string>& server_problems, const std::vector<std::string>& failures) {
  auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("\n== soak over %s: %zu servers, %zu channels x %zu calls, %.0f s, large messages %zu B\n",
              o.target.c_str(), o.servers, o.load.channels, o.load.calls_per_channel, seconds,
              o.load.large_bytes);
  std::printf("%-22s %10s %10s %10s\n", "calls", "started", "ok", "not ok");
  for (std::size_t k = 0; k < kCallKinds; ++k) {
    const auto& pk = c.kinds[k];
    std::printf("%-22s %10llu %10llu %10llu\n", std::string(to_string(static_cast<call_kind>(k))).c_str(),
                u(pk.started), u(pk.ok), u(pk.failed));
  }
  std::printf("%-22s %10llu %10llu %10llu\n", "total", u(c.started), u(c.ok),
              u(c.started - c.ok - c.in_flight));
  std::printf("failed with a status, in time: %llu (%s)\n", u(c.failed_total()), failed_by_status(c).c_str());
  std::printf("wrong replies %llu, late (past deadline + %lld ms) %llu, hung %llu, unaccounted %llu\n",
              u(c.wrong), static_cast<long long>(o.load.margin.count()), u(c.late), u(c.hung),
              u(c.in_flight));
  if (c.max_overrun_ms)
    std::printf("latest completion relative to its deadline: %+.0f ms\n", *c.max_overrun_ms);
  std::printf(
      "faults: %u kills, %u restarts, %u stops (SIGSTOP %lld ms, then SIGCONT), %u link cuts (%lld ms, %s)\n",
      f.kills, f.restarts, f.stops, static_cast<long long>(o.stop_time.count()), f.link_cuts,
      static_cast<long long>(o.cut_time.count()), o.cut_silent ? "silent" : "link down");
  if (!o.remote_servers.empty())
    std::printf("servers on host 2 (in the load, not sampled): %zu\n", o.remote_servers.size());
  std::printf(
      "channels: %llu connects, %llu failed connects, %llu disconnects, %llu heartbeat timeouts, %llu "
      "going_aways\n",
      u(ch.connects), u(ch.connect_failures), u(ch.disconnects), u(ch.heartbeat_timeouts), u(ch.going_aways));
  for (const auto& p : c.first_problems) std::printf("  call problem: %s\n", p.c_str());
  for (const auto& p : server_problems) std::printf("  server problem: %s\n", p.c_str());

  // Memory over time: at most ~24 rows, evenly spread, always the first and the last.
  std::printf("\nRSS over time (MiB; 'down' = killed, '*' = restarted since the previous row)\n%8s", "t (s)");
  for (std::size_t i = 0; i < o.servers; ++i) std::printf(" %10s", ("server " + std::to_string(i)).c_str());
  std::printf(" %10s\n", "client");
  const std::size_t step = std::max<std::size_t>(1, (samples.size() + 23) / 24);
  std::vector<int> last_pid(o.servers, 0);
  for (std::size_t r = 0; r < samples.size(); ++r) {
    if (r % step != 0 && r + 1 != samples.size()) continue;
    const auto& s = samples[r];
    std::printf("%8.0f", s.t);
    for (std::size_t i = 0; i < s.servers.size(); ++i) {
      const auto& v = s.servers[i];
      std::string cell = v.pid ? mib(v.rss) : "down";
      if (v.pid && last_pid[i] && v.pid != last_pid[i]) cell += "*";
      if (v.pid) last_pid[i] = v.pid;
      std::printf(" %10s", cell.c_str());
    }
    std::printf(" %10s\n", mib(s.client_rss).c_str());
  }
  // The servers that lived through the whole run: memory and fds, first and last sample.
  if (samples.size() >= 2) {
    const auto& a = samples.front();
    const auto& b = samples.back();
    for (std::size_t i = 0; i < o.servers; ++i) {
      if (!a.servers[i].pid || a.servers[i].pid != b.servers[i].pid) continue;
      std::optional<std::size_t> peak;
      for (const auto& s : samples)
        if (s.servers[i].rss) peak = std::max(peak.value_or(0), *s.servers[i].rss);
      std::printf("server %zu (never restarted, pid %d): RSS %s -> %s MiB (peak %s), fds %s -> %s\n", i,
                  b.servers[i].pid, mib(a.servers[i].rss).c_str(), mib(b.servers[i].rss).c_str(),
                  mib(peak).c_str(), opt_json(a.servers[i].fds).c_str(), opt_json(b.servers[i].fds).c_str());
    }
  }
  if (failures.empty()) {
    std::printf("\nPASS: every call accounted for; none hung, none late, no wrong reply\n");
  } else {
    std::printf("\nFAIL:\n");
    for (const auto& fl : failures) std::printf("  %s\n", fl.c_str());
  }
  std::fflush(stdout);
}

int run(const run_options& o) {
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  std::vector<unsigned> ports;
  if (o.base_port == 0) {
    ports = free_ports(o.address, o.servers);
  } else {
    for (std::size_t i = 0; i < o.servers; ++i) ports.push_back(o.base_port + static_cast<unsigned>(i));
  }
  std::vector<std::string> uris;
  std::string uri_list;
  for (unsigned p : ports) {
    uris.push_back(o.target + "://" + o.address + ":" + std::to_string(p));
    uri_list += (uri_list.empty() ? "" : ",") + uris.back();
  }
  server_fleet fleet(self_exe(), uris, {"--threads", std::to_string(o.server_threads)}, o.log_dir);
  for (std::size_t i = 0; i < fleet.size(); ++i) fleet.start(i);
  std::optional<remote_agent> agent;
  if (!o.agent.empty()) {
    agent.emplace(o.agent);
    for (const auto& uri : o.remote_servers) {
      agent->start_server(uri);
      uri_list += "," + uri;
    }
  }
  std::printf(
      "soak over %s for %.0f s: servers %s (logs in %s), %zu channels x %zu calls, a fault every %.1f s\n",
      o.target.c_str(), o.seconds, uri_list.c_str(), o.log_dir.c_str(), o.load.channels,
      o.load.calls_per_channel, o.fault_interval);
  std::fflush(stdout);

  std::vector<std::string> server_problems;
  std::vector<sample> samples;
  fault_counts faults;
  const auto t0 = clock::now();
  const auto end = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.seconds));
  const auto fault_period =
      std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.fault_interval));
  const auto sample_period =
      std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.sample_interval));

  // One fault at a time: `victim` is down (killed, restart at `recover_at`) or stopped (resumed
  // then), or host 2's link is cut (back by `recover_at`).
  enum class fault_state { none, killed, stopped, link_cut } state = fault_state::none;
  std::size_t victim = 0;
  clock::time_point recover_at{};
  unsigned fault_number = 0;
  std::size_t next_kill = 0, next_stop = 0;
  const std::size_t first_killable = (o.kill_first || o.servers == 1) ? 0 : 1;

  auto take_sample = [&](const load_counts& c) {
    sample s;
    s.t = seconds_since(t0);
    for (std::size_t i = 0; i < fleet.size(); ++i) {
      sample::one v;
      v.pid = fleet.pid(i);
      if (v.pid) {
        v.uptime = seconds_since(fleet.started_at(i));
        v.rss = resident_bytes(v.pid);
        v.fds = open_fds(v.pid);
        v.stopped = state == fault_state::stopped && victim == i;
      }
      s.servers.push_back(v);
    }
    s.client_rss = resident_bytes(0);
    s.client_fds = open_fds(0);
    samples.push_back(s);
    print_progress(s, c, faults);
  };
  auto recover = [&] {
    if (state == fault_state::killed) {
      try {
        fleet.start(victim);
        ++faults.restarts;
      } catch (const std::exception& e) {
        server_problems.push_back(std::string("restart failed: ") + e.what());
      }
    } else if (state == fault_state::stopped) {
      fleet.resume(victim);
    }
    state = fault_state::none;
  };

  std::optional<mixed_load> load;
  load.emplace(uri_list, o.load);
  take_sample(load->counts());
  auto next_fault = t0 + fault_period;
  auto next_sample = t0 + sample_period;
  for (auto now = clock::now(); now < end; now = clock::now()) {
    for (auto& p : fleet.reap_unexpected()) server_problems.push_back("died unasked: " + p);
    if (state != fault_state::none && now >= recover_at) recover();
    if (o.fault_interval > 0 && now >= next_fault) {
      // Faults fall on a fixed grid; one still under way makes the next one skip its turn.
      while (next_fault <= now) next_fault += fault_period;
      if (state == fault_state::none) {
        ++fault_number;
        const bool cut = o.cut_every > 0 && fault_number % o.cut_every == 0;
        const bool stop = !cut && o.stop_every > 0 && fault_number % o.stop_every == 0;
        if (cut) {
          try {
            agent->cut_link(o.cut_time, o.cut_silent);
            ++faults.link_cuts;
            state = fault_state::link_cut;
            // The agent cuts 200 ms after answering; then the link takes a moment to come back.
            recover_at = clock::now() + milliseconds(200) + o.cut_time + milliseconds(1000);
          } catch (const std::exception& e) {
            server_problems.push_back(std::string("link cut failed: ") + e.what());
          }
        } else {
          victim = stop ? next_stop++ % fleet.size()
                        : first_killable + next_kill++ % (fleet.size() - first_killable);
          if (fleet.running(victim)) {
            if (stop) {
              fleet.stop(victim);
              ++faults.stops;
              state = fault_state::stopped;
              recover_at = now + o.stop_time;
            } else {
              fleet.kill(victim);
              ++faults.kills;
              state = fault_state::killed;
              recover_at = now + o.restart_delay;
            }
          }
        }
      }
    }
    if (now >= next_sample) {
      while (next_sample <= now) next_sample += sample_period;
      take_sample(load->counts());
    }
    load->check_hung();
    std::this_thread::sleep_for(milliseconds(50));  // the fault and sampling clock's tick
  }

  // The end: no new calls; the faulty server back, so nothing waits for it; every call in flight
  // gets its deadline + margin (and the heartbeats' detection) to finish.
  if (state == fault_state::link_cut) std::this_thread::sleep_until(recover_at);
  recover();
  const bool drained = load->stop(load->longest_call() + milliseconds(2000));
  const auto counts = load->counts();
  const auto channels = load->channel_totals();
  const double seconds = seconds_since(t0);
  take_sample(counts);
  for (auto& p : fleet.reap_unexpected()) server_problems.push_back("died unasked: " + p);
  if (drained) {
    load.reset();  // closes the channels: the servers then shut down without clients
  }
  for (auto& p : fleet.shutdown(milliseconds(10000))) server_problems.push_back("shutdown: " + p);
  for (const auto& uri : o.remote_servers) {
    try {
      agent->terminate_server(uri);
    } catch (const std::exception& e) {
      server_problems.push_back(std::string("shutdown on host 2: ") + e.what());
    }
  }

  std::vector<std::string> failures;
  if (counts.hung > 0 || !drained) failures.push_back(std::to_string(counts.hung) + " calls hung");
  if (counts.late > 0)
    failures.push_back(std::to_string(counts.late) + " calls completed past deadline + margin");
  if (counts.wrong > 0) failures.push_back(std::to_string(counts.wrong) + " wrong replies");
  if (!server_problems.empty())
    failures.push_back(std::to_string(server_problems.size()) + " server problems");
  if (counts.ok == 0) failures.push_back("no call succeeded");
  if (faults.kills < o.min_kills)
    failures.push_back("only " + std::to_string(faults.kills) + " kills, " + std::to_string(o.min_kills) +
                       " asked for");
  if (faults.restarts < faults.kills) failures.push_back("a killed server was not restarted");

  print_table(o, seconds, counts, faults, channels, samples, server_problems, failures);
  if (!o.json_path.empty())
    std::ofstream(o.json_path) << to_json(o, seconds, counts, faults, channels, samples, server_problems,
                                          failures);
  if (!drained) {
    // Calls still hang: their coroutines hold the channels, and tearing those down could hang too.
    std::fflush(nullptr);
    ::_exit(1);
  }
  return failures.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  try {
    if (role == "server") return run_server(argc, argv);
    if (role == "run") {
      run_options o;
      if (!parse_run(argc, argv, o)) {
        usage();
        return 2;
      }
      return run(o);
    }
  } catch (const std::exception& e) {
    std::cerr << "rdmarpc_soak " << role << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: rdmarpc_soak server --listen URI ... | rdmarpc_soak run [options] (run --help)\n";
  return 2;
}
