// Real-verbs tests of the Soft-RoCE test bed (label `rdma`, run inside the VM on rxe0): the
// cm_pingpong example's server and client connect an RC QP with rdma_cm and exchange checked
// messages with send/recv, first as two threads, then as two processes of the real program.
#include "cm_pingpong/pingpong.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "cm_pingpong/options.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr const char* kRxeAddress = "10.0.0.1";  // rxe0's address in the VM (tools/rxe-vm)
// Outer bound for a whole exchange; every single wait inside cm_pingpong is bounded by
// options::timeout, so this only catches a bug in those bounds.
constexpr auto kRunLimit = 120s;

cm_pingpong::options base_options(std::uint64_t iterations, std::size_t size) {
  cm_pingpong::options o;
  o.address = kRxeAddress;
  o.port = 0;  // the server picks a free port and tells the client: no clashes between tests
  o.iterations = iterations;
  o.size = size;
  o.timeout = 10s;
  return o;
}

struct pair_result {
  cm_pingpong::server_report server;
  cm_pingpong::client_report client;
};

// Server on one thread; the client starts only once the server reports it is listening.
pair_result run_pair_in_threads(std::uint64_t iterations, std::size_t size) {
  auto server_opts = base_options(iterations, size);
  std::promise<std::uint16_t> listening;
  auto port_future = listening.get_future();
  auto server = std::async(std::launch::async, [&listening, server_opts] {
    bool reported = false;
    try {
      return cm_pingpong::run_server(server_opts, [&](std::uint16_t port) {
        reported = true;
        listening.set_value(port);
      });
    } catch (...) {
      if (!reported) listening.set_exception(std::current_exception());
      throw;
    }
  });
  REQUIRE(port_future.wait_for(kRunLimit) == std::future_status::ready);
  auto client_opts = base_options(iterations, size);
  client_opts.mode = cm_pingpong::mode::client;
  client_opts.port = port_future.get();  // rethrows a server setup failure
  REQUIRE(client_opts.port != 0);
  auto client =
      std::async(std::launch::async, [client_opts] { return cm_pingpong::run_client(client_opts); });
  REQUIRE(client.wait_for(kRunLimit) == std::future_status::ready);
  REQUIRE(server.wait_for(kRunLimit) == std::future_status::ready);
  // get() rethrows pingpong_error, whose message Catch prints (e.g. "ping 0 has the wrong contents").
  return {server.get(), client.get()};
}

// A child process whose stdout+stderr come back through a pipe; killed if still running at the end.
class child_process {
 public:
  explicit child_process(const std::vector<std::string>& argv) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_fd_ = fds[0];
    if (rc != 0) pid_ = -1;
    INFO("posix_spawn " << argv[0] << ": " << std::strerror(rc));
    REQUIRE(rc == 0);
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
  }

  // Reads output until it contains `text` (true) or EOF/deadline (false).
  bool read_until(const std::string& text, clock_type::time_point deadline) {
    while (output_.find(text) == std::string::npos) {
      if (!read_some(deadline)) return false;
    }
    return true;
  }

  // Reads the rest of the output and reaps the process; nullopt if it outlived the deadline.
  std::optional<int> wait(clock_type::time_point deadline) {
    while (read_some(deadline)) {
    }
    if (clock_type::now() >= deadline) return std::nullopt;
    int status = 0;
    REQUIRE(::waitpid(pid_, &status, 0) == pid_);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  const std::string& output() const { return output_; }

 private:
  // False at EOF or when the deadline passed.
  bool read_some(clock_type::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      if (left.count() <= 0) return false;
      pollfd pfd{out_fd_, POLLIN, 0};
      const int n = ::poll(&pfd, 1, static_cast<int>(left.count()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      char buf[4096];
      const ssize_t got = ::read(out_fd_, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      output_.append(buf, static_cast<std::size_t>(got));
      return true;
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string output_;
};

}  // namespace

TEST_CASE("cm_pingpong on rxe0: server and client threads exchange checked messages", "[testbed][rdma]") {
  // 64 B fits one packet; 5000 B spans several packets at the VM's RDMA MTU of 1024.
  const auto [iterations, size] = GENERATE(table<std::uint64_t, std::size_t>({{500, 64}, {50, 5000}}));
  INFO(iterations << " round trips of " << size << " bytes");
  const auto result = run_pair_in_threads(iterations, size);
  CHECK(result.server.messages_checked == iterations);
  CHECK(result.client.echoes_checked == iterations);
  CHECK(result.client.rtt.count == iterations);
  // No lower bound on the times themselves: a TCG guest that booted without a TSC reads a
  // 4 ms-tick clock, so a round trip can honestly measure 0 us (CI saw exactly that).
  CHECK(result.client.rtt.min_us >= 0);
  CHECK(result.client.rtt.min_us <= result.client.rtt.median_us);
  CHECK(result.client.rtt.median_us <= result.client.rtt.max_us);
}

TEST_CASE("cm_pingpong on rxe0: the program runs as separate server and client processes",
          "[testbed][rdma]") {
  const auto deadline = clock_type::now() + kRunLimit;
  child_process server({CM_PINGPONG_EXE, "server", "-a", kRxeAddress, "-p", "0", "-n", "200"});
  // The server prints its port once listening; starting the client any earlier would be rejected.
  const std::string marker = "listening on " + std::string(kRxeAddress) + ":";
  REQUIRE(server.read_until("\n", deadline));
  INFO("server output so far:\n" << server.output());
  REQUIRE(server.output().find(marker) != std::string::npos);
  const auto at = server.output().find(marker) + marker.size();
  const std::string port = server.output().substr(at, server.output().find('\n', at) - at);
  REQUIRE_FALSE(port.empty());
  REQUIRE(port != "0");

  child_process client({CM_PINGPONG_EXE, "client", "-a", kRxeAddress, "-p", port, "-n", "200"});
  const auto client_rc = client.wait(deadline);
  const auto server_rc = server.wait(deadline);
  INFO("client output:\n" << client.output());
  INFO("server output:\n" << server.output());
  REQUIRE(client_rc.has_value());
  REQUIRE(server_rc.has_value());
  CHECK(*client_rc == 0);
  CHECK(*server_rc == 0);
  CHECK(client.output().find("200 round trips of 64 bytes") != std::string::npos);
  CHECK(server.output().find("200 pings checked and echoed") != std::string::npos);
}

TEST_CASE("cm_pingpong on rxe0: a client without a server fails with a clear error", "[testbed][rdma]") {
  auto opts = base_options(1, 64);
  opts.mode = cm_pingpong::mode::client;
  opts.port = 1;  // nothing listens there: rdma_cm answers with a reject (or unreachable)
  opts.timeout = 5s;
  CHECK_THROWS_AS(cm_pingpong::run_client(opts), cm_pingpong::pingpong_error);
}
