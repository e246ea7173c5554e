// rdmarpc.admin.v1 over a real server (metrics on): GetStats reports the server's counters, each
// method's calls by status with latency and bytes, and, when asked, every connection's figures.
#include <catch2/catch.hpp>

#include "rpc/status.hpp"
#include "services_fixture.hpp"

using namespace rdmarpc;
using namespace rdmarpc::test;
namespace admin_v1 = rdmarpc::admin::v1;

namespace {

admin_v1::ServerStats get_stats(const std::shared_ptr<channel>& ch, bool connections) {
  admin_v1::Admin::Stub stub(ch);
  admin_v1::GetStatsRequest request;
  request.set_include_connections(connections);
  waiter<boost::system::error_code, admin_v1::ServerStats> w;
  stub.async_get_stats(request, w.handler());
  auto r = w.get();
  REQUIRE(r);
  INFO(std::get<0>(*r).message());
  REQUIRE(!std::get<0>(*r));
  return std::get<1>(*r);
}

const admin_v1::MethodStats* method(const admin_v1::ServerStats& s, std::string_view name) {
  for (const auto& m : s.methods())
    if (m.method() == name) return &m;
  return nullptr;
}

std::uint64_t finished(const admin_v1::MethodStats& m, std::string_view code) {
  for (const auto& f : m.finished())
    if (f.code() == code) return f.count();
  return 0;
}

}  // namespace

TEST_CASE("admin GetStats reports per-method calls, latency and bytes, and each connection",
          "[services][admin]") {
  const auto target = GENERATE(from_range(e2e_targets()));
  CAPTURE(target);
  services_fixture f(target);
  svctest::Counter::Stub counter(f.client());
  svctest::AddRequest request;
  request.set_name("x");
  for (int i = 0; i < 4; ++i) {
    waiter<boost::system::error_code, svctest::Item> w;
    counter.async_add(request, w.handler());
    auto r = w.get();
    REQUIRE(r);
    REQUIRE(!std::get<0>(*r));
  }
  // The server's end hooks run just after the client has its answer: ask until they counted.
  admin_v1::ServerStats s;
  const admin_v1::MethodStats* add = nullptr;
  for (int i = 0; i < 200; ++i) {
    s = get_stats(f.client(), true);
    add = method(s, "/svctest.Counter/Add");
    if (add != nullptr && finished(*add, "OK") == 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(add != nullptr);
  CHECK(s.metrics_enabled());
  CHECK(add->started() == 4);
  CHECK(finished(*add, "OK") == 4);
  CHECK(add->in_flight() == 0);
  CHECK(add->request_bytes() == 4 * request.ByteSizeLong());
  CHECK(add->latency_count() == 4);
  CHECK(add->latency_p50_us() <= add->latency_p99_us());
  // The GetStats call being answered is in flight; earlier ones finished OK.
  const auto* self = method(s, "/rdmarpc.admin.v1.Admin/GetStats");
  REQUIRE(self != nullptr);
  CHECK(self->in_flight() == 1);
  CHECK(s.connections() == 1);
  CHECK(s.connections_accepted() >= 1);
  REQUIRE(s.connection_stats_size() == 1);
  const auto& c = s.connection_stats(0);
  CHECK(c.transport() == target);
  CHECK(c.calls_in_flight() == 1);
  CHECK(c.calls_started() >= 5);
  CHECK(c.messages_received() >= 5);
  CHECK(c.rnr_errors() == 0);
  CHECK(s.uptime_seconds() > 0);
  // Without include_connections: no per-connection entries.
  CHECK(get_stats(f.client(), false).connection_stats_size() == 0);
}
