// rdmarpc_testbed_agent: host 2's side of the multi-host bed (tests/multihost/README.md).
//   rdmarpc_testbed_agent --listen tcp://10.0.0.2:7400 --soak PATH [--log-dir DIR]
// Serves rdmarpc.testbed.Agent: starts, SIGKILLs and SIGTERMs test servers (`rdmarpc_soak server`
// processes, one per fixed endpoint, each named by its URI) and cuts this host's link for a while.
// The servers die with the agent. Test support: one client at a time, every handler on the one io
// thread (the fleet's children must be forked by the thread that outlives them).
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "rpc/server.hpp"
#include "server_fleet.hpp"
#include "testbed/agent.rdmarpc.pb.h"

namespace {

using rdmarpc::soak::server_fleet;
namespace testbed = rdmarpc::testbed;

class agent final : public testbed::Agent::Service {
 public:
  agent(std::string soak_exe, std::string log_dir)
      : soak_exe_(std::move(soak_exe)), log_dir_(std::move(log_dir)) {}

  boost::asio::awaitable<testbed::Ack> start_server(rdmarpc::server_context&,
                                                    const testbed::ServerRef& request) override {
    auto& fleet = fleet_of(request.uri());
    if (fleet.running(0)) co_return ack("already running");
    try {
      fleet.start(0);
    } catch (const std::exception& e) {
      throw rdmarpc::status_error(rdmarpc::status_code::internal, e.what());
    }
    spdlog::info("agent: started {} (pid {})", request.uri(), fleet.pid(0));
    co_return ack("started");
  }

  boost::asio::awaitable<testbed::Ack> kill_server(rdmarpc::server_context&,
                                                   const testbed::ServerRef& request) override {
    auto& fleet = fleet_of(request.uri());
    if (!fleet.running(0)) co_return ack("not running");
    fleet.kill(0);
    spdlog::info("agent: killed {}", request.uri());
    co_return ack("killed");
  }

  boost::asio::awaitable<testbed::Ack> terminate_server(rdmarpc::server_context&,
                                                        const testbed::ServerRef& request) override {
    auto& fleet = fleet_of(request.uri());
    if (!fleet.running(0)) co_return ack("not running");
    // The server shuts down gracefully (going away to its clients, in-flight calls finish).
    const auto bad = fleet.shutdown(std::chrono::seconds(30));
    if (!bad.empty()) throw rdmarpc::status_error(rdmarpc::status_code::internal, bad.front());
    spdlog::info("agent: {} shut down gracefully", request.uri());
    co_return ack("shut down");
  }

  boost::asio::awaitable<testbed::Ack> cut_link(rdmarpc::server_context&,
                                                const testbed::LinkCut& request) override {
    if (request.milliseconds() == 0 || request.milliseconds() > 60'000)
      throw rdmarpc::status_error(rdmarpc::status_code::invalid_argument, "milliseconds must be 1..60000");
    const std::string seconds = std::to_string(request.milliseconds() / 1000) + "." +
                                std::to_string(1000 + request.milliseconds() % 1000).substr(1);
    const std::string cut =
        request.silent() ? "tc qdisc add dev eth0 root netem loss 100%" : "ip link set eth0 down";
    const std::string mend = request.silent() ? "tc qdisc del dev eth0 root" : "ip link set eth0 up";
    // In the background, 200 ms from now, so this answer crosses the link before it is cut.
    const std::string script =
        "(sleep 0.2; " + cut + "; sleep " + seconds + "; " + mend + ") >/dev/null 2>&1 &";
    if (std::system(script.c_str()) != 0)
      throw rdmarpc::status_error(rdmarpc::status_code::internal, "could not start: " + script);
    spdlog::info("agent: cutting the link for {} ms ({})", request.milliseconds(), cut);
    co_return ack(cut + " for " + seconds + " s");
  }

 private:
  static testbed::Ack ack(std::string detail) {
    testbed::Ack a;
    a.set_detail(std::move(detail));
    return a;
  }
  server_fleet& fleet_of(const std::string& uri) {
    if (uri.empty()) throw rdmarpc::status_error(rdmarpc::status_code::invalid_argument, "no uri");
    auto it = fleets_.find(uri);
    if (it == fleets_.end()) {
      auto fleet = std::make_unique<server_fleet>(soak_exe_, std::vector<std::string>{uri},
                                                  std::vector<std::string>{"--name", uri}, log_dir_);
      it = fleets_.emplace(uri, std::move(fleet)).first;
    }
    return *it->second;
  }

  std::string soak_exe_;
  std::string log_dir_;
  std::map<std::string, std::unique_ptr<server_fleet>> fleets_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen, soak, log_dir = "testbed-agent-logs";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--listen") {
      listen = argv[i + 1];
    } else if (arg == "--soak") {
      soak = argv[i + 1];
    } else if (arg == "--log-dir") {
      log_dir = argv[i + 1];
    } else {
      listen.clear();
      break;
    }
  }
  if (listen.empty() || soak.empty()) {
    std::cerr << "usage: rdmarpc_testbed_agent --listen URI --soak PATH_TO_rdmarpc_soak [--log-dir DIR]\n";
    return 2;
  }
  boost::asio::io_context io(1);
  agent service(soak, log_dir);
  rdmarpc::server server(io.get_executor());
  server.add_service(service);
  const auto bound = server.listen(listen);
  std::cerr << "rdmarpc_testbed_agent: listening on " << bound.to_uri() << std::endl;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code, int) { io.stop(); });
  io.run();
  return 0;
}
