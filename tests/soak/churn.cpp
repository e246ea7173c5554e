#include "churn.hpp"

#include <future>
#include <memory>
#include <optional>
#include <thread>

#include "io_thread.hpp"
#include "rpc/channel.hpp"
#include "rpc/server.hpp"
#include "rpc/unary_call.hpp"
#include "test_service.hpp"

namespace rdmarpc::soak {
namespace {

using clock = std::chrono::steady_clock;

// Polls `done` until it holds or `limit` passes: waiting for asynchronous teardown to finish.
template <typename Predicate>
bool wait_until(Predicate done, std::chrono::milliseconds limit) {
  const auto end = clock::now() + limit;
  while (!done()) {
    if (clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// One cycle: a new channel, one Echo call, close. Empty on success, else what went wrong.
std::string one_cycle(io_thread& client, rdmarpc::server& server, const std::string& uri, std::size_t n) {
  auto ch = channel::create(client.executor(), uri);
  test::EchoRequest request;
  request.set_data("churn " + std::to_string(n));
  // Shared: a call that times out here may still complete later.
  auto reply = std::make_shared<std::promise<std::pair<boost::system::error_code, std::string>>>();
  auto got = reply->get_future();
  async_unary_call<test::EchoReply>(*ch, test::test_service::echo, nullptr, request,
                                    [reply](boost::system::error_code ec, test::EchoReply r) {
                                      reply->set_value({ec, r.data()});
                                    });
  if (got.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
    return "cycle " + std::to_string(n) + ": the call did not complete in 30 s";
  auto [ec, data] = got.get();
  ch->close();
  ch.reset();
  if (ec) return "cycle " + std::to_string(n) + ": " + ec.message();
  if (data != request.data()) return "cycle " + std::to_string(n) + ": wrong reply '" + data + "'";
  // The server's end too, before the next cycle: every cycle starts from nothing.
  if (!wait_until([&] { return server.stats().connections == 0; }, std::chrono::seconds(10)))
    return "cycle " + std::to_string(n) + ": the server still holds the connection after 10 s";
  return {};
}

}  // namespace

churn_result run_churn(const churn_options& o) {
  churn_result result;
  test::test_service service;
  {
    io_thread server_io;
    io_thread client_io;
    auto server = std::make_unique<rdmarpc::server>(server_io.executor());
    server->add_service(service);
    const std::string uri = server->listen(o.target + "://" + o.address + ":0").to_uri();

    // The device's objects before any connection: only the listener's cm_id.
    const auto idle = count_resources().rdma;
    for (std::size_t i = 0; i < o.warmup_cycles && result.first_failure.empty(); ++i)
      result.first_failure = one_cycle(client_io, *server, uri, i);
    // Settled after the warm-up: the last cycles' QPs, rings and cm_ids outlive the rpc
    // connection for a while (rdma_cm's disconnect and time-wait) and must be gone first; fds and
    // heap are taken after the warm-up, so one-time costs (librdmacm's device fds) stay out.
    wait_until([&] { return count_resources().rdma == idle; }, o.settle);
    result.before = count_resources();
    if (o.on_measure_start) o.on_measure_start();

    const auto start = clock::now();
    const std::size_t step = std::max<std::size_t>(1, o.cycles / 100);
    for (std::size_t i = 0; i < o.cycles && result.first_failure.empty(); ++i) {
      result.first_failure = one_cycle(client_io, *server, uri, o.warmup_cycles + i);
      if (result.first_failure.empty()) ++result.calls_ok;
      result.cycles_done = i + 1;
      if (o.progress && (result.cycles_done % step == 0 || result.cycles_done == o.cycles))
        o.progress(result.cycles_done);
    }
    result.seconds = std::chrono::duration<double>(clock::now() - start).count();

    // Whatever teardown is still under way gets `settle` to give everything back.
    wait_until(
        [&] {
          result.after = count_resources();
          return result.after.growth_since(result.before, o.heap_slack_bytes).empty();
        },
        o.settle);
    if (o.on_measure_end) o.on_measure_end();
    result.leaked = result.after.growth_since(result.before, o.heap_slack_bytes);
    server.reset();
  }
  return result;
}

std::string churn_result::to_json(const churn_options& o) const {
  return "{\"target\": " + json_string(o.target) + ", \"cycles\": " + std::to_string(cycles_done) +
         ", \"calls_ok\": " + std::to_string(calls_ok) + ", \"seconds\": " + std::to_string(seconds) +
         ", \"before\": " + before.to_json() + ", \"after\": " + after.to_json() +
         ", \"leaked\": " + json_string(leaked) + ", \"failure\": " + json_string(first_failure) +
         ", \"ok\": " + (ok() ? "true" : "false") + "}";
}

}  // namespace rdmarpc::soak
