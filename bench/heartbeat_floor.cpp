// heartbeat_floor: the least CPU that heartbeats of N idle tcp connections can cost on this
// machine, as a baseline for `rdmarpc_echo_bench heartbeats`. No rdmarpc: N loopback tcp pairs,
// one epoll thread per side; every --exchange-ms the client thread writes 16 bytes on each
// connection (one timer for all, as rdmarpc's channels tick on one grid) and the server thread
// echoes them. Each exchange is then exactly what a ping/pong must cost at the least: two sends,
// two reads, the wake-ups. The process's CPU over --seconds is reported as a share of one core,
// with the cost of one null system call, because that is what sets the floor (about 0.1 us on
// bare metal, several times more in some VMs).

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "bench/common/cpu_time.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
  std::size_t connections = 100;
  int exchange_ms = 600;
  double seconds = 10;
  std::string json_path;
};

[[noreturn]] void usage() {
  std::cerr << "usage: heartbeat_floor [--connections N] [--exchange-ms MS] [--seconds S] [--json PATH]\n"
               "  N loopback tcp pairs exchange 16 bytes every MS (default 100, 600 ms, 10 s); prints the\n"
               "  process's CPU as a share of one core and the cost of a null system call\n";
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--connections")
      o.connections = std::stoul(value());
    else if (a == "--exchange-ms")
      o.exchange_ms = std::stoi(value());
    else if (a == "--seconds")
      o.seconds = std::stod(value());
    else if (a == "--json")
      o.json_path = value();
    else
      usage();
  }
  if (o.connections == 0 || o.exchange_ms <= 0 || o.seconds <= 0) usage();
  return o;
}

int check(int r, const char* what) {
  if (r < 0) throw std::system_error(errno, std::generic_category(), what);
  return r;
}

// An owned file descriptor.
class fd {
 public:
  explicit fd(int f = -1) noexcept : f_(f) {}
  fd(fd&& o) noexcept : f_(o.f_) { o.f_ = -1; }
  fd& operator=(fd&& o) noexcept {
    std::swap(f_, o.f_);
    return *this;
  }
  ~fd() {
    if (f_ >= 0) ::close(f_);
  }
  int get() const noexcept { return f_; }

 private:
  int f_;
};

void add_to_epoll(int epoll, int f, std::uint64_t tag, std::uint32_t events) {
  epoll_event e{};
  e.events = events;
  e.data.u64 = tag;
  check(epoll_ctl(epoll, EPOLL_CTL_ADD, f, &e), "epoll_ctl");
}

// Reads what `f` holds (edge-triggered: until EAGAIN); echoes it back when `echo`. Returns the
// number of reads that carried data.
std::uint64_t drain(int f, bool echo) {
  std::array<char, 256> buf;
  std::uint64_t reads = 0;
  for (;;) {
    const auto n = ::recv(f, buf.data(), buf.size(), 0);
    if (n <= 0) return reads;
    ++reads;
    if (echo)
      check(static_cast<int>(::send(f, buf.data(), static_cast<std::size_t>(n), MSG_NOSIGNAL)), "send");
  }
}

// One side's loop: sockets tagged by index, `stop` (an eventfd) tagged ~0, `timer` (client only)
// tagged ~1, on which every socket gets 16 bytes. `reads` counts the reads that carried data, for
// the main thread to sample at the measured window's ends.
void run_side(const std::vector<fd>& sockets, int stop, int timer, bool echo,
              std::atomic<std::uint64_t>& reads) {
  const fd epoll(check(epoll_create1(EPOLL_CLOEXEC), "epoll_create1"));
  for (std::size_t i = 0; i < sockets.size(); ++i)
    add_to_epoll(epoll.get(), sockets[i].get(), i, EPOLLIN | EPOLLET);
  add_to_epoll(epoll.get(), stop, ~std::uint64_t{0}, EPOLLIN);
  if (timer >= 0) add_to_epoll(epoll.get(), timer, ~std::uint64_t{1}, EPOLLIN);
  const std::array<char, 16> ping{};
  std::array<epoll_event, 256> events;
  for (;;) {
    const int n = epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()), -1);
    if (n < 0 && errno == EINTR) continue;
    check(n, "epoll_wait");
    for (int k = 0; k < n; ++k) {
      const auto tag = events[static_cast<std::size_t>(k)].data.u64;
      if (tag == ~std::uint64_t{0}) return;
      if (tag == ~std::uint64_t{1}) {
        std::uint64_t expirations;
        check(static_cast<int>(::read(timer, &expirations, sizeof expirations)), "read timerfd");
        for (const auto& s : sockets)
          check(static_cast<int>(::send(s.get(), ping.data(), ping.size(), MSG_NOSIGNAL)), "send");
        continue;
      }
      reads.fetch_add(drain(sockets[tag].get(), echo), std::memory_order_relaxed);
    }
  }
}

// Microseconds one null system call takes here.
double null_syscall_us() {
  constexpr int kCalls = 200'000;
  const auto t0 = clock_type::now();
  for (int i = 0; i < kCalls; ++i) ::syscall(SYS_getppid);
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / kCalls;
}

double seconds_of(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

int main(int argc, char** argv) try {
  const auto o = parse(argc, argv);
  const fd listener(check(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  check(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), "bind");
  check(::listen(listener.get(), 1024), "listen");
  check(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), "getsockname");
  std::vector<fd> clients, servers;
  for (std::size_t i = 0; i < o.connections; ++i) {
    clients.emplace_back(check(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket"));
    check(::connect(clients.back().get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), "connect");
    servers.emplace_back(check(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC), "accept"));
    for (const int f : {clients.back().get(), servers.back().get()}) {
      const int one = 1;
      check(::setsockopt(f, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), "TCP_NODELAY");
      check(::fcntl(f, F_SETFL, O_NONBLOCK), "O_NONBLOCK");
    }
  }
  const fd stop_server(check(::eventfd(0, EFD_CLOEXEC), "eventfd"));
  const fd stop_client(check(::eventfd(0, EFD_CLOEXEC), "eventfd"));
  const fd timer(check(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), "timerfd_create"));
  itimerspec period{};
  period.it_interval.tv_sec = o.exchange_ms / 1000;
  period.it_interval.tv_nsec = static_cast<long>(o.exchange_ms % 1000) * 1'000'000L;
  period.it_value = period.it_interval;
  check(::timerfd_settime(timer.get(), 0, &period, nullptr), "timerfd_settime");

  std::atomic<std::uint64_t> server_reads{0}, client_reads{0};
  std::thread server([&] { run_side(servers, stop_server.get(), -1, true, server_reads); });
  std::thread client([&] { run_side(clients, stop_client.get(), timer.get(), false, client_reads); });
  const auto pings0 = server_reads.load(), pongs0 = client_reads.load();
  const auto cpu0 = rdmarpc::bench::process_cpu_time();
  const auto client0 = rdmarpc::bench::thread_cpu_time(client.native_handle());
  const auto server0 = rdmarpc::bench::thread_cpu_time(server.native_handle());
  const auto t0 = clock_type::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  const double cpu = seconds_of(rdmarpc::bench::process_cpu_time() - cpu0);
  const double client_cpu = seconds_of(rdmarpc::bench::thread_cpu_time(client.native_handle()) - client0);
  const double server_cpu = seconds_of(rdmarpc::bench::thread_cpu_time(server.native_handle()) - server0);
  const auto pings = server_reads.load() - pings0;
  const auto exchanges = client_reads.load() - pongs0;  // one pong read per exchange (16 B, never split)
  const std::uint64_t one = 1;
  for (const int f : {stop_server.get(), stop_client.get()})
    check(static_cast<int>(::write(f, &one, sizeof one)), "write eventfd");
  client.join();
  server.join();
  const double syscall_us = null_syscall_us();
  const double per_exchange_us = exchanges ? cpu * 1e6 / static_cast<double>(exchanges) : 0;

  std::cerr << "heartbeat_floor: " << o.connections << " tcp connections exchanging 16 bytes every "
            << o.exchange_ms << " ms over " << elapsed << " s: " << 100.0 * cpu / elapsed
            << " % of one core (client side " << 100.0 * client_cpu / elapsed << " %, server side "
            << 100.0 * server_cpu / elapsed << " %); " << exchanges << " exchanges (" << pings
            << " pings read), " << per_exchange_us << " us of CPU each; a null system call takes "
            << syscall_us << " us" << std::endl;
  if (!o.json_path.empty()) {
    std::ofstream json(o.json_path);
    json << "{\"kind\":\"heartbeat_floor\",\"system\":\"floor\",\"transport\":\"tcp\",\"connections\":"
         << o.connections << ",\"exchange_ms\":" << o.exchange_ms << ",\"seconds\":" << elapsed
         << ",\"cpu_seconds\":" << cpu << ",\"cpu_percent\":" << 100.0 * cpu / elapsed
         << ",\"client_cpu_percent\":" << 100.0 * client_cpu / elapsed
         << ",\"server_cpu_percent\":" << 100.0 * server_cpu / elapsed << ",\"exchanges\":" << exchanges
         << ",\"us_per_exchange\":" << per_exchange_us << ",\"null_syscall_us\":" << syscall_us << "}\n";
    if (!json) throw std::runtime_error("cannot write " + o.json_path);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "heartbeat_floor: " << e.what() << std::endl;
  return 1;
}
