// capnp_echo_bench: the Cap'n Proto RPC baseline of the echo benchmark (the echo of
// bench/echo_bench.proto written as bench/capnp_baseline/echo_bench.capnp, same client flags as
// rdmarpc_echo_bench and grpc_echo_bench). Modes:
//   server --listen HOST:PORT                serve until SIGINT/SIGTERM
//   client --target HOST:PORT [client flags] run the payload x concurrency matrix
//   inproc [client flags]                    server thread + client in one process (callgrind)
//   idle [--seconds S] [--json PATH]         CPU used by a connected, idle client+server
// URIs may carry a "tcp://" prefix so scripts can use one address form for every system.
#include <pthread.h>
#include <signal.h>

#include <exception>
#include <fstream>
#include <future>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/capnp_baseline/echo_client.hpp"
#include "bench/capnp_baseline/echo_server.hpp"
#include "bench/common/bench_result.hpp"
#include "bench/common/client_options.hpp"
#include "bench/common/cpu_time.hpp"
#include "bench/common/progress.hpp"

namespace {

using namespace rdmarpc::bench;
using capnp_baseline::echo_client;
using capnp_baseline::echo_server;

std::string strip_scheme(std::string uri) {
  if (uri.rfind("tcp://", 0) == 0) uri.erase(0, 6);
  return uri;
}

void usage() {
  std::cerr << "usage: capnp_echo_bench server --listen HOST:PORT\n"
               "       capnp_echo_bench client --target HOST:PORT [client flags]\n"
               "       capnp_echo_bench inproc [client flags]\n"
               "       capnp_echo_bench idle [--seconds S] [--json PATH]\n"
               "client flags:\n"
            << client_flags_help();
}

std::vector<bench_result> run_matrix(echo_client& client, const client_options& options) {
  if (!client.wait_connected(std::chrono::seconds(10)))
    throw std::runtime_error("Cap'n Proto connection did not come up");
  progress out(options.progress);
  std::vector<bench_result> results;
  for (auto payload : options.payloads) {
    for (auto concurrency : options.concurrency) {
      results.push_back(client.run_point(payload, concurrency, options.load, out));
      if (!options.json_path.empty()) append_json_line(options.json_path, results.back());
    }
  }
  return results;
}

int serve(const std::string& address) {
  // SIGINT/SIGTERM are taken by a waiting thread, so the server stops outside any signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  echo_server server(address);
  std::cerr << "capnp_echo_bench: listening on port " << server.port() << std::endl;
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.stop();
  });
  server.run();
  waiter.join();
  return 0;
}

// The server of inproc and idle: its own thread and KJ event loop, stopped on destruction.
class server_thread {
 public:
  server_thread() {
    std::promise<unsigned> port;
    auto bound = port.get_future();
    thread_ = std::thread([this, &port] {
      bool up = false;
      try {
        echo_server server("127.0.0.1:0");
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
    server_->stop();
    thread_.join();
  }
  unsigned port() const noexcept { return port_; }

 private:
  std::thread thread_;
  echo_server* server_ = nullptr;
  unsigned port_ = 0;
};

int run(int argc, char** argv) {
  if (argc < 2) {
    usage();
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
      usage();
      return 2;
    }
  }

  if (mode == "server") return serve(address);
  if (mode == "client") {
    echo_client client(address);
    const auto results = run_matrix(client, options);
    print_table(std::cout, results);
    return 0;
  }
  if (mode == "inproc" || mode == "idle") {
    server_thread server;
    echo_client client("127.0.0.1:" + std::to_string(server.port()));
    if (mode == "inproc") {
      print_table(std::cout, run_matrix(client, options));
      return 0;
    }
    // One call proves the pair is connected; then nothing happens for idle_seconds.
    client_options one;
    one.payloads = {64};
    one.concurrency = {1};
    one.load.warmup = std::chrono::nanoseconds(0);
    one.load.calls = 1;
    one.progress = false;
    run_matrix(client, one);
    const auto cpu0 = process_cpu_time();
    const auto t0 = std::chrono::steady_clock::now();
    client.idle(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(idle_seconds)));
    idle_result r{"capnp", "tcp", "event",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  std::chrono::duration<double>(process_cpu_time() - cpu0).count()};
    std::cout << to_json(r) << std::endl;
    if (!options.json_path.empty()) std::ofstream(options.json_path, std::ios::app) << to_json(r) << '\n';
    return 0;
  }
  usage();
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "capnp_echo_bench: " << e.what() << "\n";
    return 1;
  } catch (const kj::Exception& e) {
    std::cerr << "capnp_echo_bench: " << e.getDescription().cStr() << "\n";
    return 1;
  }
}
