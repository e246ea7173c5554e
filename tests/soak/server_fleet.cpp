#include "server_fleet.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace rdmarpc::soak {
namespace {

using clock = std::chrono::steady_clock;

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// Reads from `fd` until a full line arrived, EOF, or `limit` passed; the text read so far.
std::string read_line(int fd, std::chrono::milliseconds limit, bool& timed_out) {
  std::string text;
  const auto end = clock::now() + limit;
  timed_out = false;
  while (text.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;  // the loop head sees the time
    char buf[256];
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EOF: the child closed it (exited) without a line
    text.append(buf, static_cast<std::size_t>(got));
  }
  return text;
}

}  // namespace

std::string describe_wait_status(int st) {
  if (WIFEXITED(st)) return "exited " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st))
    return "killed by signal " + std::to_string(WTERMSIG(st)) + " (" + ::strsignal(WTERMSIG(st)) + ")";
  return "wait status " + std::to_string(st);
}

server_fleet::server_fleet(std::string exe, std::vector<std::string> listen_uris,
                           std::vector<std::string> server_args, std::string log_dir)
    : exe_(std::move(exe)), server_args_(std::move(server_args)), log_dir_(std::move(log_dir)) {
  std::filesystem::create_directories(log_dir_);
  for (auto& uri : listen_uris) servers_.push_back(server{std::move(uri), 0, {}});
}

server_fleet::~server_fleet() {
  for (auto& s : servers_) {
    if (s.pid == 0) continue;
    ::kill(s.pid, SIGKILL);
    int st = 0;
    ::waitpid(s.pid, &st, 0);
    s.pid = 0;
  }
}

std::string server_fleet::describe(std::size_t i, pid_t pid, int wait_status) const {
  return "server " + std::to_string(i) + " (pid " + std::to_string(pid) + ", " + servers_[i].uri +
         "): " + describe_wait_status(wait_status);
}

void server_fleet::start(std::size_t i, std::chrono::milliseconds ready_within) {
  auto& s = servers_.at(i);
  if (s.pid != 0) throw std::logic_error("server " + std::to_string(i) + " is running");

  // Everything the child needs is prepared here: between fork and exec only async-signal-safe
  // calls (the parent has other threads).
  std::vector<std::string> args{exe_, "server", "--listen", s.uri, "--ready-fd", "3"};
  args.insert(args.end(), server_args_.begin(), server_args_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const std::string log_path = log_dir_ + "/server-" + std::to_string(i) + ".log";
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw_errno("open " + log_path);
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    ::close(log_fd);
    throw_errno("pipe2");
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    ::close(ready[0]);
    ::close(ready[1]);
    throw_errno("fork");
  }
  if (pid == 0) {
    // The child: die with the soak, log to the file, report readiness on fd 3, inherit nothing
    // else (the soak's client sockets above all: an inherited socket would keep a connection the
    // client closed open).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    if (::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0 || ::dup2(ready[1], 3) < 0) ::_exit(126);
    ::fcntl(3, F_SETFD, 0);
    ::close_range(4, ~0U, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(ready[1]);
  const std::string header = "== soak: server " + std::to_string(i) + " started as pid " +
                             std::to_string(pid) + " on " + s.uri + "\n";
  [[maybe_unused]] const auto written = ::write(log_fd, header.data(), header.size());
  ::close(log_fd);
  s.pid = pid;
  s.started = clock::now();

  bool timed_out = false;
  const std::string line = read_line(ready[0], ready_within, timed_out);
  ::close(ready[0]);
  if (line.rfind("ready", 0) == 0) return;
  // Not ready: say why, and leave nothing running.
  std::string why;
  if (timed_out) {
    ::kill(pid, SIGKILL);
    why = "not ready within " + std::to_string(ready_within.count()) + " ms";
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  s.pid = 0;
  if (why.empty()) why = describe_wait_status(st) + " before it was ready";
  throw std::runtime_error("server " + std::to_string(i) + " on " + s.uri + ": " + why + " (see " + log_path +
                           ")");
}

void server_fleet::kill(std::size_t i) {
  auto& s = servers_.at(i);
  if (s.pid == 0) return;
  ::kill(s.pid, SIGKILL);
  int st = 0;
  ::waitpid(s.pid, &st, 0);
  s.pid = 0;
}

void server_fleet::stop(std::size_t i) {
  if (servers_.at(i).pid != 0) ::kill(servers_[i].pid, SIGSTOP);
}

void server_fleet::resume(std::size_t i) {
  if (servers_.at(i).pid != 0) ::kill(servers_[i].pid, SIGCONT);
}

std::vector<std::string> server_fleet::reap_unexpected() {
  std::vector<std::string> ended;
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    auto& s = servers_[i];
    if (s.pid == 0) continue;
    int st = 0;
    if (::waitpid(s.pid, &st, WNOHANG) == s.pid) {
      ended.push_back(describe(i, s.pid, st));
      s.pid = 0;
    }
  }
  return ended;
}

std::vector<std::string> server_fleet::shutdown(std::chrono::milliseconds limit) {
  std::vector<std::string> problems;
  for (auto& s : servers_) {
    if (s.pid == 0) continue;
    ::kill(s.pid, SIGCONT);
    ::kill(s.pid, SIGTERM);
  }
  const auto end = clock::now() + limit;
  for (;;) {
    bool any = false;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      auto& s = servers_[i];
      if (s.pid == 0) continue;
      int st = 0;
      if (::waitpid(s.pid, &st, WNOHANG) == s.pid) {
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
          problems.push_back(describe(i, s.pid, st) + " on SIGTERM");
        s.pid = 0;
      } else {
        any = true;
      }
    }
    if (!any) break;
    if (clock::now() >= end) {
      for (std::size_t i = 0; i < servers_.size(); ++i) {
        if (servers_[i].pid == 0) continue;
        problems.push_back("server " + std::to_string(i) + " (pid " + std::to_string(servers_[i].pid) +
                           "): still running " + std::to_string(limit.count()) + " ms after SIGTERM");
        kill(i);
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a child's exit
  }
  return problems;
}

}  // namespace rdmarpc::soak
