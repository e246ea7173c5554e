#pragma once
// A child process for a test, and reading one byte from it with a timeout. Forked before this
// process touches any verbs object, so the child never shares the parent's device context (no
// ibv_fork_init needed). Layer: tests (rdma).

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>

namespace rdmarpc::rdma_test {

struct child_process {
  pid_t pid = -1;
  int to_child = -1;    // parent writes
  int from_child = -1;  // parent reads

  template <typename Body>
  static child_process spawn(Body body) {
    int down[2], up[2];
    REQUIRE(::pipe(down) == 0);
    REQUIRE(::pipe(up) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(down[1]);
      ::close(up[0]);
      int rc = 1;
      try {
        rc = body(down[0], up[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
      }
      std::_Exit(rc);
    }
    ::close(down[0]);
    ::close(up[1]);
    return child_process{pid, down[1], up[0]};
  }

  ~child_process() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (to_child >= 0) ::close(to_child);
    if (from_child >= 0) ::close(from_child);
  }
};

inline bool read_byte(int fd, char& out, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return false;
  return ::read(fd, &out, 1) == 1;
}

}  // namespace rdmarpc::rdma_test
