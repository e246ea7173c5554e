#pragma once
// rdmarpc::bench::baseline_main: the whole command line of an RPC baseline over tcp
// (grpc_echo_bench, capnp_echo_bench): server, client, inproc and idle modes around the baseline's
// own echo_client and echo_server. Layer: bench. Threading: the main thread drives the client; a
// server runs on one thread of its own (inproc, idle) or on the main thread (server mode).

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <future>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/common/bench_result.hpp"
#include "bench/common/client_options.hpp"
#include "bench/common/driver.hpp"
#include "bench/common/progress.hpp"

namespace rdmarpc::bench {

// A baseline's echo server: listens on "host:port" (port 0 = any) when constructed, throwing
// std::runtime_error when it cannot; run() serves on the calling thread until shutdown(), which is
// safe from any thread and at most once in effect.
template <class S>
concept baseline_server = requires(const std::string& address, S s) {
  S(address);
  { s.port() } -> std::convertible_to<unsigned>;
  s.run();
  s.shutdown();
};

// A baseline's echo client of "host:port", driven by one thread: wait_connected() is false when
// the connection does not come up in time; run_point() measures one point (throwing
// std::runtime_error when it makes no progress); idle() waits for `duration` with nothing in flight.
template <class C>
concept baseline_client = requires(const std::string& target, C c, progress& out, const load_spec& load,
                                   std::chrono::nanoseconds d) {
  C(target);
  { c.wait_connected(std::chrono::seconds(1)) } -> std::same_as<bool>;
  { c.run_point(std::uint64_t{}, std::uint64_t{}, load, out) } -> std::same_as<bench_result>;
  c.idle(d);
};

// What names a baseline in its output.
struct baseline_names {
  std::string_view program;        // "grpc_echo_bench": usage and error lines
  std::string_view system;         // "grpc": the idle JSON line
  std::string_view not_connected;  // the error when wait_connected() fails
};

namespace baseline_detail {

// URIs may carry a "tcp://" prefix so scripts can use one address form for every system.
inline std::string strip_scheme(std::string uri) {
  if (uri.rfind("tcp://", 0) == 0) uri.erase(0, 6);
  return uri;
}

inline void usage(std::string_view program) {
  std::cerr << "usage: " << program << " server --listen HOST:PORT\n"
            << "       " << program << " client --target HOST:PORT [client flags]\n"
            << "       " << program << " inproc [client flags]\n"
            << "       " << program << " idle [--seconds S] [--json PATH]\n"
            << "client flags:\n"
            << client_flags_help();
}

template <baseline_client Client>
std::vector<bench_result> run_matrix(Client& client, const client_options& options,
                                     const baseline_names& names) {
  if (!client.wait_connected(std::chrono::seconds(10)))
    throw std::runtime_error(std::string(names.not_connected));
  return bench::run_matrix(client, options);
}

template <baseline_server Server>
int serve(const std::string& address, const baseline_names& names) {
  // SIGINT/SIGTERM are taken by a waiting thread, so the server's own threads (which inherit this
  // mask) never see them and shutdown happens outside any signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Server server(address);
  std::cerr << names.program << ": listening on port " << server.port() << std::endl;
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.shutdown();
  });
  server.run();
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter if run() ended by itself
  waiter.join();
  return 0;
}

// The server of inproc and idle: constructed, run and destroyed on a thread of its own (a server
// may own a per-thread event loop), shut down when this object is destroyed.
template <baseline_server Server>
class server_thread {
 public:
  server_thread() {
    std::promise<unsigned> port;
    auto bound = port.get_future();
    thread_ = std::thread([this, &port] {
      bool up = false;
      try {
        Server server("127.0.0.1:0");
        server_ = &server;
        port.set_value(server.port());
        up = true;
        server.run();
      } catch (...) {
        if (!up) port.set_exception(std::current_exception());
      }
    });
    try {
      port_ = bound.get();
    } catch (...) {
      thread_.join();
      throw;
    }
  }
  ~server_thread() {
    server_->shutdown();
    thread_.join();
  }
  server_thread(const server_thread&) = delete;
  server_thread& operator=(const server_thread&) = delete;
  unsigned port() const noexcept { return port_; }

 private:
  std::thread thread_;
  Server* server_ = nullptr;
  unsigned port_ = 0;
};

template <baseline_client Client, baseline_server Server>
int run(int argc, char** argv, const baseline_names& names) {
  if (argc < 2) {
    usage(names.program);
    return 2;
  }
  const std::string mode = argv[1];
  client_options options;
  std::string address = "127.0.0.1:0";
  double idle_seconds = 5;
  arg_reader args(argc, argv, 2);
  while (!args.done()) {
    if (parse_client_flag(args, options)) continue;
    const auto f = args.flag();
    if (f == "--listen" || f == "--target") {
      address = strip_scheme(args.value());
    } else if (f == "--seconds") {
      idle_seconds = std::stod(args.value());
    } else {
      std::cerr << "unknown flag " << f << "\n";
      usage(names.program);
      return 2;
    }
  }

  if (mode == "server") return serve<Server>(address, names);
  if (mode == "client") {
    Client client(address);
    const auto results = run_matrix(client, options, names);
    print_table(std::cout, results);
    return 0;
  }
  if (mode == "inproc" || mode == "idle") {
    server_thread<Server> server;
    Client client("127.0.0.1:" + std::to_string(server.port()));
    if (mode == "inproc") {
      print_table(std::cout, run_matrix(client, options, names));
      return 0;
    }
    // One call proves the pair is connected; then nothing happens for idle_seconds.
    run_matrix(client, one_call_options(), names);
    const auto r = measure_idle(std::string(names.system), "tcp", "event",
                                [&] { client.idle(idle_duration(idle_seconds)); });
    report_idle(r, options.json_path);
    return 0;
  }
  usage(names.program);
  return 2;
}

}  // namespace baseline_detail

// The baseline's main(): returns its exit code (2: usage, 1: an error, reported on stderr as
// "program: what"). Exceptions not derived from std::exception pass through to the caller.
template <baseline_client Client, baseline_server Server>
int baseline_main(int argc, char** argv, const baseline_names& names) {
  try {
    return baseline_detail::run<Client, Server>(argc, argv, names);
  } catch (const std::exception& e) {
    std::cerr << names.program << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace rdmarpc::bench
