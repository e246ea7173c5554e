#include "bench/echo_client.hpp"

#include <boost/asio/steady_timer.hpp>
#include <stdexcept>
#include <vector>

namespace rdmarpc::bench {
namespace {

using clock = closed_loop::clock;

struct slot {
  clock::time_point started;
};

}  // namespace

echo_client::echo_client(boost::asio::io_context& io, std::shared_ptr<rdmarpc::channel> channel,
                         std::string transport, std::string mode)
    : io_(io),
      channel_(channel),
      stub_(std::move(channel)),
      transport_(std::move(transport)),
      mode_(std::move(mode)) {}

bench_result echo_client::run_point(std::uint64_t payload, std::uint64_t concurrency, const load_spec& load,
                                    progress& out) {
  EchoRequest request;
  request.set_payload(std::string(payload, 'x'));
  std::vector<slot> slots(concurrency);

  auto result = point_result("rdmarpc", transport_, mode_, payload, concurrency);

  const auto start = clock::now();
  closed_loop loop(load, start);
  out.begin(point_label(result), start);
  std::string first_error;
  bool stuck = false;

  // Issues the next call of `s`; its completion records it and issues the following one. The
  // handler captures two pointers, nothing that allocates.
  auto issue = [&](auto& self, slot& s) -> void {
    s.started = clock::now();
    loop.on_start();
    stub_.async_echo(request, [&, &self = self, sp = &s](boost::system::error_code ec, EchoReply reply) {
      const auto now = clock::now();
      const bool ok = !ec && reply.payload().size() == payload;
      if (!ok && first_error.empty()) first_error = ec ? ec.message() : "short reply";
      loop.on_complete(sp->started, now, ok);
      out.tick(loop, now);
      if (loop.may_start()) self(self, *sp);
      if (loop.finished()) io_.stop();
    });
  };

  // Redraws progress while calls are slow, and gives up on a point that stopped moving.
  boost::asio::steady_timer watchdog(io_);
  bool watchdog_done = false;
  auto arm = [&](auto& self) -> void {
    watchdog.expires_after(std::chrono::milliseconds(200));
    watchdog.async_wait([&, &self = self](boost::system::error_code ec) {
      if (ec) {
        watchdog_done = true;
        return;
      }
      const auto now = clock::now();
      out.tick(loop, now);
      if (now > loop.give_up_at()) {
        stuck = true;
        io_.stop();
        return;
      }
      self(self);
    });
  };

  io_.restart();
  for (auto& s : slots) {
    if (!loop.may_start()) break;
    issue(issue, s);
  }
  arm(arm);
  io_.run();
  watchdog.cancel();
  if (stuck) {
    // Outstanding handlers reference this frame: the process must not continue past this point
    // with them queued, so the caller treats this as fatal.
    throw std::runtime_error("rdmarpc benchmark point made no progress" +
                             (first_error.empty() ? std::string() : " (first error: " + first_error + ")"));
  }
  // Let the watchdog's cancellation run now, while its frame still exists. Not poll(): in
  // busy-poll mode the transport always has a handler ready, so poll() would never return.
  io_.restart();
  while (!watchdog_done) io_.run_one();
  if (!first_error.empty()) out.note("rdmarpc call failed: " + first_error);
  fill_from(result, loop, clock::now());
  out.end(result);
  return result;
}

}  // namespace rdmarpc::bench
