// grpc.health.v1 over a real server: Check's answers, Watch's first status and every change in
// order, latest-only coalescing for a client that does not read, shutdown() ending watches (and not
// holding the server's graceful shutdown), and a cancelled watch going away.
#include <catch2/catch.hpp>

#include "rpc/status.hpp"
#include "services_fixture.hpp"

using namespace rdmarpc;
using namespace rdmarpc::test;
namespace health = grpc::health::v1;
using health::HealthCheckResponse;

namespace {

std::pair<boost::system::error_code, HealthCheckResponse> check(health::Health::Stub& stub,
                                                                std::string service) {
  health::HealthCheckRequest request;
  request.set_service(std::move(service));
  waiter<boost::system::error_code, HealthCheckResponse> w;
  stub.async_check(request, w.handler());
  auto r = w.get();
  REQUIRE(r);
  return {std::get<0>(*r), std::get<1>(*r)};
}

health::HealthCheckRequest watch_request(std::string service) {
  health::HealthCheckRequest request;
  request.set_service(std::move(service));
  return request;
}

// The next status a watch sends (fails the test when it does not come).
HealthCheckResponse::ServingStatus next_status(
    client_stream<health::HealthCheckRequest, HealthCheckResponse>& watch) {
  HealthCheckResponse response;
  const auto ec = read(watch, response);
  INFO(ec.message());
  REQUIRE(!ec);
  return response.status();
}

}  // namespace

TEST_CASE("health Check answers the statuses set, NOT_FOUND for unknown services", "[services][health]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  health::Health::Stub stub(f.client());

  auto [ec, reply] = check(stub, "");
  CHECK(!ec);
  CHECK(reply.status() == HealthCheckResponse::SERVING);  // the server as a whole, from the start

  std::tie(ec, reply) = check(stub, "svctest.Counter");
  CHECK(ec == status_code::not_found);  // no status set yet: as gRPC

  f.health().set_status("svctest.Counter", HealthCheckResponse::SERVING);
  std::tie(ec, reply) = check(stub, "svctest.Counter");
  CHECK(!ec);
  CHECK(reply.status() == HealthCheckResponse::SERVING);

  // Any thread may set it.
  std::thread([&] { f.health().set_status("svctest.Counter", HealthCheckResponse::NOT_SERVING); }).join();
  std::tie(ec, reply) = check(stub, "svctest.Counter");
  CHECK(!ec);
  CHECK(reply.status() == HealthCheckResponse::NOT_SERVING);

  f.health().clear_status("svctest.Counter");
  std::tie(ec, reply) = check(stub, "svctest.Counter");
  CHECK(ec == status_code::not_found);
  CHECK(!f.health().status("svctest.Counter"));
}

TEST_CASE("health Watch sends the current status, then every change in order", "[services][health]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  health::Health::Stub stub(f.client());

  auto watch = stub.watch(watch_request("svctest.Counter"));
  CHECK(next_status(watch) == HealthCheckResponse::SERVICE_UNKNOWN);  // unknown: not an error
  REQUIRE(eventually([&] { return f.health().watch_count() == 1; }));

  f.health().set_status("svctest.Counter", HealthCheckResponse::SERVING);
  CHECK(next_status(watch) == HealthCheckResponse::SERVING);
  f.health().set_status("svctest.Counter", HealthCheckResponse::SERVING);    // no change: nothing sent
  f.health().set_status("other.Service", HealthCheckResponse::NOT_SERVING);  // not this watch's
  f.health().set_status("svctest.Counter", HealthCheckResponse::NOT_SERVING);
  CHECK(next_status(watch) == HealthCheckResponse::NOT_SERVING);
  f.health().clear_status("svctest.Counter");
  CHECK(next_status(watch) == HealthCheckResponse::SERVICE_UNKNOWN);

  // A second watch of the whole server sees its status at once.
  auto whole = stub.watch(watch_request(""));
  CHECK(next_status(whole) == HealthCheckResponse::SERVING);
  REQUIRE(eventually([&] { return f.health().watch_count() == 2; }));
}

TEST_CASE("health Watch keeps only the latest status for a client that does not read", "[services][health]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  // The smallest window a client may have: 16 messages in flight towards it.
  channel_options options;
  options.stream_window = kInitialStreamWindow;
  services_fixture f(target, options);
  health::Health::Stub stub(f.client());
  f.health().set_status("svctest.Counter", HealthCheckResponse::SERVING);

  auto watch = stub.watch(watch_request("svctest.Counter"));
  REQUIRE(eventually([&] { return f.health().watch_count() == 1; }));
  // Changes while the client reads nothing, then a last distinct one. Slow enough that the watch
  // sends many of them (filling the client's window: its next write waits), and the rest are
  // coalesced while that write waits; without the pause most would be coalesced before any write.
  constexpr int kChanges = 300;
  for (int i = 0; i < kChanges; ++i) {
    f.health().set_status("svctest.Counter",
                          i % 2 == 0 ? HealthCheckResponse::NOT_SERVING : HealthCheckResponse::SERVING);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  f.health().clear_status("svctest.Counter");

  int received = 0;
  for (;;) {
    const auto status = next_status(watch);
    ++received;
    if (status == HealthCheckResponse::SERVICE_UNKNOWN) break;
    REQUIRE(received <= kChanges + 2);
  }
  // What the window held, the write waiting for room and the latest: nothing grew with the changes.
  INFO("received " << received);
  CHECK(received <= static_cast<int>(kInitialStreamWindow.messages) + 3);
}

TEST_CASE("health shutdown() flips every status to NOT_SERVING and ends the watches", "[services][health]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  health::Health::Stub stub(f.client());
  f.health().set_status("svctest.Counter", HealthCheckResponse::SERVING);

  auto watch = stub.watch(watch_request("svctest.Counter"));
  CHECK(next_status(watch) == HealthCheckResponse::SERVING);
  auto unknown = stub.watch(watch_request("not.There"));
  CHECK(next_status(unknown) == HealthCheckResponse::SERVICE_UNKNOWN);
  REQUIRE(eventually([&] { return f.health().watch_count() == 2; }));

  f.health().shutdown();
  CHECK(next_status(watch) == HealthCheckResponse::NOT_SERVING);
  HealthCheckResponse response;
  CHECK(is_end_of_stream(read(watch, response)));
  CHECK(!finish(watch));  // ended with OK
  CHECK(is_end_of_stream(read(unknown, response)));
  CHECK(!finish(unknown));
  CHECK(eventually([&] { return f.health().watch_count() == 0; }));

  // Ignored until resume(); Check sees NOT_SERVING, the whole server too.
  f.health().set_status("svctest.Counter", HealthCheckResponse::SERVING);
  CHECK(check(stub, "svctest.Counter").second.status() == HealthCheckResponse::NOT_SERVING);
  CHECK(check(stub, "").second.status() == HealthCheckResponse::NOT_SERVING);

  // A watch started now tells the status and ends at once.
  auto late = stub.watch(watch_request(""));
  CHECK(next_status(late) == HealthCheckResponse::NOT_SERVING);
  CHECK(is_end_of_stream(read(late, response)));
  CHECK(!finish(late));

  f.health().resume();
  f.health().set_status("svctest.Counter", HealthCheckResponse::SERVING);
  CHECK(check(stub, "svctest.Counter").second.status() == HealthCheckResponse::SERVING);
}

TEST_CASE("health watches do not hold a graceful server shutdown after health shutdown()",
          "[services][health]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  health::Health::Stub stub(f.client());
  auto watch = stub.watch(watch_request(""));
  CHECK(next_status(watch) == HealthCheckResponse::SERVING);
  REQUIRE(eventually([&] { return f.health().watch_count() == 1; }));

  f.health().shutdown();
  const auto start = std::chrono::steady_clock::now();
  CHECK(f.shutdown(std::chrono::seconds(30), std::chrono::seconds(20)));  // far less than the grace
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(15));
  CHECK(next_status(watch) == HealthCheckResponse::NOT_SERVING);
  HealthCheckResponse response;
  CHECK(is_end_of_stream(read(watch, response)));
  CHECK(f.health().watch_count() == 0);
}

TEST_CASE("health watches end when the server shuts down without health shutdown()", "[services][health]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  health::Health::Stub stub(f.client());
  auto watch = stub.watch(watch_request(""));
  CHECK(next_status(watch) == HealthCheckResponse::SERVING);
  REQUIRE(eventually([&] { return f.health().watch_count() == 1; }));

  // The grace passes with the watch open; then its connection is closed and the watch ends.
  CHECK(f.shutdown(std::chrono::milliseconds(200), std::chrono::seconds(20)));
  HealthCheckResponse response;
  const auto ec = read(watch, response);
  CHECK(ec);
  CHECK(ec != boost::system::errc::timed_out);
  CHECK(finish(watch));  // not OK: the stream broke
  CHECK(eventually([&] { return f.health().watch_count() == 0; }));
}

TEST_CASE("health Watch ends on the server when the client cancels", "[services][health]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  INFO("target " << target);
  services_fixture f(target);
  health::Health::Stub stub(f.client());
  {
    auto watch = stub.watch(watch_request("svctest.Counter"));
    CHECK(next_status(watch) == HealthCheckResponse::SERVICE_UNKNOWN);
    auto dropped = stub.watch(watch_request("svctest.Counter"));
    CHECK(next_status(dropped) == HealthCheckResponse::SERVICE_UNKNOWN);
    REQUIRE(eventually([&] { return f.health().watch_count() == 2; }));

    watch.cancel();
    HealthCheckResponse response;
    CHECK(read(watch, response) == status_code::cancelled);
    CHECK(eventually([&] { return f.health().watch_count() == 1; }));
    // `dropped` is destroyed unread at the end of this scope: that cancels it too.
  }
  CHECK(eventually([&] { return f.health().watch_count() == 0; }));
  // Changes after that reach nobody, and the service still answers.
  f.health().set_status("svctest.Counter", HealthCheckResponse::SERVING);
  CHECK(check(stub, "svctest.Counter").second.status() == HealthCheckResponse::SERVING);
}
