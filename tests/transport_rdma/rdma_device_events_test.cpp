// Device async events for real: a second Soft-RoCE device (on a dummy netdev of its own, so rxe0's
// tests carry on) whose link is set down must end the connections on it at once with
// errc::port_down, through the device_event_monitor, while a connection on rxe0 stays up; a PORT_ERR
// read after the port came back must end nothing.
// Needs root and iproute2 in the VM (the rdma suite has both). Label `rdma`.
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "tests/transport_rdma/rdma_test_support.hpp"
#include "transport/connect.hpp"
#include "transport/rdma/device_event_monitor.hpp"

using namespace rdmarpc;
using namespace rdmarpc::rdma_test;
using transport::errc;

namespace {

constexpr const char* kNetdev = "rdmarpc_ev0";
constexpr const char* kDevice = "rxe_ev0";
constexpr const char* kAddress = "10.0.9.1";

// iproute2's tools by full path: the VM's /bin/sh is busybox, whose own `ip` applet knows no dummy
// links.
std::string tool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"}) {
    const std::string path = std::string(dir) + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  FAIL("no " << name << " in /usr/sbin, /usr/bin, /sbin or /bin (the rdma suite's VM has iproute2)");
  return {};
}

int run(const std::string& command) {
  INFO(command);
  return std::system(command.c_str());
}

// A new dummy netdev with a new rxe device on it, up. Left in place at the end: deleting an rxe
// device waits for every process that opened it, which librdmacm may still hold. One left by an
// earlier run in this VM is replaced: once its port went down under live connections, rxe (Debian
// 12's kernel) connects nothing on it any more, not even rping.
void bring_up_second_device() {
  const std::string ip = tool("ip"), rdma = tool("rdma");
  if (run(ip + " link show " + kNetdev + " >/dev/null 2>&1") == 0) {
    REQUIRE(run(ip + " link del " + kNetdev) == 0);  // its rxe device goes with it (asynchronously)
  }
  REQUIRE(run(ip + " link add " + kNetdev + " type dummy") == 0);
  REQUIRE(run(ip + " addr add " + kAddress + "/24 dev " + kNetdev) == 0);
  REQUIRE(run(ip + " link set " + kNetdev + " up") == 0);
  // The old device's name is free once every process that opened it let go (librdmacm opens every
  // device, so another rdma test running now may hold it a while): up to 10 s.
  const std::string sysfs = std::string("/sys/class/infiniband/") + kDevice;
  bool added = false;
  for (int i = 0; i < 100 && !added; ++i) {
    added = ::access(sysfs.c_str(), F_OK) != 0 &&
            run(rdma + " link add " + kDevice + " type rxe netdev " + kNetdev + " 2>/dev/null") == 0;
    if (!added) ::usleep(100'000);
  }
  REQUIRE(added);
}

}  // namespace

TEST_CASE(
    "rdma: the port going down ends the connections on it at once (port_down), not the others, "
    "and a flap that is over ends nothing",
    "[rdma][device_events]") {
  bring_up_second_device();
  boost::asio::io_context io;
  auto monitor = transport::make_device_event_monitor(io.get_executor());
  transport::connection_options options;
  options.device_events = monitor;

  // One pair on the second device, one on rxe0; both watched by the one monitor.
  auto doomed = connect_pair(io, 7521, options, options, kAddress);
  auto spared = connect_pair(io, 7522, options, options);
  // A flap before anyone reads the device's events: its PORT_ERR waits in the queue behind nothing
  // that says the port came back, and must end nothing once read (the port is active again).
  REQUIRE(run(tool("ip") + " link set " + kNetdev + " down") == 0);
  REQUIRE(run(tool("ip") + " link set " + kNetdev + " up") == 0);
  doomed.client->start(doomed.client_rec);
  doomed.server->start(doomed.server_rec);
  spared.client->start(spared.client_rec);
  spared.server->start(spared.server_rec);
  REQUIRE(run_until(io, [&] { return monitor->stats().devices == 2; }));
  CHECK(monitor->stats().subscriptions == 4);
  REQUIRE(run_until(io, [&] { return monitor->stats().stale_port_errors >= 1; }));
  CHECK(monitor->stats().connections_ended == 0);
  CHECK_FALSE(doomed.client_rec->closed);
  CHECK_FALSE(doomed.server_rec->closed);

  // Idle connections, no heartbeats at this layer: nothing but the port event can end them here.
  REQUIRE(run(tool("ip") + " link set " + kNetdev + " down") == 0);
  REQUIRE(run_until(io, [&] { return doomed.client_rec->closed && doomed.server_rec->closed; }));
  CHECK(*doomed.client_rec->closed == errc::port_down);
  CHECK(*doomed.server_rec->closed == errc::port_down);
  CHECK(monitor->stats().connections_ended == 2);

  // rxe0's pair is untouched and still carries a message.
  CHECK_FALSE(spared.client_rec->closed);
  CHECK_FALSE(spared.server_rec->closed);
  const std::string hello = "still here";
  REQUIRE_FALSE(spared.client->send_copy(boost::asio::buffer(hello)));
  REQUIRE(run_until(io, [&] { return !spared.server_rec->messages.empty(); }));
  CHECK(spared.server_rec->messages.front().size() == hello.size());

  // The ended connections let go of their subscriptions.
  doomed.client.reset();
  doomed.server.reset();
  REQUIRE(run_until(io, [&] { return monitor->stats().subscriptions == 2; }));
  REQUIRE(run(tool("ip") + " link set " + kNetdev + " up") == 0);
}
