#pragma once
// link_watch: when did host 2's link go silent, as seen from host 1? An ICMP echo to the peer every
// few milliseconds from a thread of its own (a raw socket: the bed runs as root); the peer's
// kernel answers while its link carries traffic. The last answer before a cut's effects is the
// cut's moment to within one period, independent of how long the agent's `tc` took to run (up to
// ~0.8 s under TCG). Test support for the multi-host bed only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace rdmarpc::test {

class link_watch {
 public:
  using clock = std::chrono::steady_clock;

  explicit link_watch(const std::string& peer_ip,
                      std::chrono::milliseconds period = std::chrono::milliseconds(5))
      : period_(period) {
    fd_ = ::socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    if (fd_ < 0)
      throw std::runtime_error("link_watch: no raw ICMP socket: " + std::string(std::strerror(errno)));
    peer_.sin_family = AF_INET;
    if (::inet_pton(AF_INET, peer_ip.c_str(), &peer_.sin_addr) != 1) {
      ::close(fd_);
      throw std::runtime_error("link_watch: not an IPv4 address: " + peer_ip);
    }
    try {
      thread_ = std::thread([this] { run(); });
    } catch (...) {
      ::close(fd_);
      throw;
    }
  }
  link_watch(const link_watch&) = delete;
  link_watch& operator=(const link_watch&) = delete;
  ~link_watch() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  // The silence `t` fell in: the last answer at or before `t` (none if there was none) and the
  // first one after it (none while the silence lasts). A time outside any cut falls between two
  // answers a period apart.
  struct silence {
    std::optional<clock::time_point> from;
    std::optional<clock::time_point> until;
  };
  silence silence_around(clock::time_point t) const {
    std::lock_guard lock(mutex_);
    const auto it = std::upper_bound(answers_.begin(), answers_.end(), t);
    silence s;
    if (it != answers_.begin()) s.from = *std::prev(it);
    if (it != answers_.end()) s.until = *it;
    return s;
  }
  std::chrono::milliseconds period() const noexcept { return period_; }

 private:
  void run() {
    const std::uint16_t id = static_cast<std::uint16_t>(::getpid());
    std::uint16_t seq = 0;
    auto next_send = clock::now();
    while (!stop_) {
      if (const auto now = clock::now(); now >= next_send) {
        send_echo(id, ++seq);
        next_send = std::max(next_send + period_, now);  // after a stall: no burst to catch up
      }
      // Rounded up: a wait rounded down to 0 would spin through the period's last millisecond.
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_send - clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<long>(0, wait.count()))) > 0) receive(id);
    }
  }

  void send_echo(std::uint16_t id, std::uint16_t seq) {
    icmphdr h{};
    h.type = ICMP_ECHO;
    h.un.echo.id = htons(id);
    h.un.echo.sequence = htons(seq);
    h.checksum = checksum(&h, sizeof h);
    (void)::sendto(fd_, &h, sizeof h, 0, reinterpret_cast<const sockaddr*>(&peer_), sizeof peer_);
  }

  void receive(std::uint16_t id) {
    std::uint8_t buf[256];
    sockaddr_in from{};
    socklen_t len = sizeof from;
    const auto n = ::recvfrom(fd_, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
    const auto at = clock::now();  // when read, at most a scheduling delay after it arrived
    if (n < static_cast<ssize_t>(sizeof(iphdr))) return;
    const std::size_t ip_len = static_cast<std::size_t>(reinterpret_cast<const iphdr*>(buf)->ihl) * 4;
    if (static_cast<std::size_t>(n) < ip_len + sizeof(icmphdr)) return;
    icmphdr h;
    std::memcpy(&h, buf + ip_len, sizeof h);
    if (h.type != ICMP_ECHOREPLY || ntohs(h.un.echo.id) != id ||
        from.sin_addr.s_addr != peer_.sin_addr.s_addr)
      return;
    std::lock_guard lock(mutex_);
    answers_.push_back(at);
  }

  static std::uint16_t checksum(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i + 1 < bytes; i += 2) sum += static_cast<std::uint32_t>(p[i] << 8 | p[i + 1]);
    if (bytes % 2 != 0) sum += static_cast<std::uint32_t>(p[bytes - 1] << 8);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return htons(static_cast<std::uint16_t>(~sum));
  }

  std::chrono::milliseconds period_;
  int fd_ = -1;
  sockaddr_in peer_{};
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<clock::time_point> answers_;  // in arrival order (one thread appends)
  std::thread thread_;                      // last: starts once the rest is set up
};

}  // namespace rdmarpc::test
