#pragma once
// server_fleet: K server processes (`rdmarpc_soak server --listen URI`), each on its own fixed
// endpoint, that the fault soak starts, SIGKILLs, SIGSTOPs/SIGCONTs and restarts, and whose
// resident memory it samples. Children die with the soak (PR_SET_PDEATHSIG) and inherit no fd
// but stdin and a log file. Test support. Threading: one thread (the one that made it, which must
// outlive the children: the death signal follows the forking thread).

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace rdmarpc::soak {

class server_fleet {
 public:
  // `exe` is run as `exe server --listen URI --ready-fd 3 <server_args>` for each URI; each
  // child's stdout and stderr are appended to `log_dir`/server-<index>.log.
  server_fleet(std::string exe, std::vector<std::string> listen_uris, std::vector<std::string> server_args,
               std::string log_dir);
  ~server_fleet();  // SIGKILLs and reaps whatever still runs
  server_fleet(const server_fleet&) = delete;
  server_fleet& operator=(const server_fleet&) = delete;

  std::size_t size() const noexcept { return servers_.size(); }
  const std::string& uri(std::size_t i) const { return servers_[i].uri; }
  pid_t pid(std::size_t i) const { return servers_[i].pid; }  // 0 when not running
  bool running(std::size_t i) const { return servers_[i].pid != 0; }
  // When server i was last started (for its uptime).
  std::chrono::steady_clock::time_point started_at(std::size_t i) const { return servers_[i].started; }

  // Starts server i and waits (at most `ready_within`) until it listens. Throws std::runtime_error
  // when it cannot be started or did not report ready in time (the child is killed then).
  void start(std::size_t i, std::chrono::milliseconds ready_within = std::chrono::seconds(10));
  // SIGKILL, and reaps it.
  void kill(std::size_t i);
  void stop(std::size_t i);    // SIGSTOP
  void resume(std::size_t i);  // SIGCONT

  // Children that exited without being asked to (a crash, an abort): reaps them and says how each
  // ended ("server 1 (pid 123): killed by signal 11"); they count as not running from then on.
  std::vector<std::string> reap_unexpected();

  // SIGTERM to each running server (SIGCONT first, in case), then waits up to `limit` for all of
  // them; returns how each that did not exit with status 0 ended (the laggards are SIGKILLed).
  std::vector<std::string> shutdown(std::chrono::milliseconds limit);

 private:
  struct server {
    std::string uri;
    pid_t pid = 0;
    std::chrono::steady_clock::time_point started;
  };
  std::string describe(std::size_t i, pid_t pid, int wait_status) const;

  std::string exe_;
  std::vector<std::string> server_args_;
  std::string log_dir_;
  std::vector<server> servers_;
};

// How a waitpid status reads: "exited 0", "killed by signal 9 (Killed)".
std::string describe_wait_status(int wait_status);

}  // namespace rdmarpc::soak
