#include "bench/capnp_baseline/echo_client.hpp"

#include <kj/async-io.h>

#include <stdexcept>
#include <vector>

namespace rdmarpc::bench::capnp_baseline {

using clock = closed_loop::clock;

// The state of one point, shared by its slots' promise chains and the watchdog.
struct echo_client::point {
  closed_loop loop;
  progress& out;
  std::vector<capnp::byte> payload;
  capnp::MessageSize size_hint;
  bool noted_error = false;
};

echo_client::echo_client(const std::string& target)
    : client_(target.c_str()), echo_(client_.getMain<EchoBench>()) {}

bool echo_client::wait_connected(std::chrono::seconds timeout) {
  auto& timer = client_.getIoProvider().getTimer();
  try {
    timer.timeoutAfter(timeout.count() * kj::SECONDS, echo_.echoRequest().send().ignoreResult())
        .wait(client_.getWaitScope());
  } catch (const kj::Exception&) {
    return false;
  }
  // EzRpcClient::getMain() hands out a promise for the server's capability (the connection is not
  // up yet). Calls made through it are built in a local message, queued and copied into a real
  // RPC call even after it has resolved; a client that keeps calling holds the resolved capability.
  auto hook = capnp::ClientHook::from(kj::cp(echo_));
  for (;;) {
    KJ_IF_MAYBE (next, hook->getResolved()) {
      hook = next->addRef();
    } else {
      break;
    }
  }
  echo_ = capnp::Capability::Client(kj::mv(hook)).castAs<EchoBench>();
  try {
    echo_.echoRequest().send().ignoreResult().wait(client_.getWaitScope());
    return true;
  } catch (const kj::Exception&) {
    return false;
  }
}

kj::Promise<void> echo_client::slot_loop(point& p, clock::time_point started) {
  if (!p.loop.may_start()) return kj::READY_NOW;
  auto request = echo_.echoRequest(p.size_hint);
  request.setPayload(kj::arrayPtr(p.payload.data(), p.payload.size()));
  p.loop.on_start();
  // Returning the next call's chain from the continuation: KJ collapses such chains, so a slot's
  // loop does not grow with the number of calls.
  return request.send().then(
      [this, &p, started](capnp::Response<EchoBench::EchoResults>&& reply) {
        const auto now = clock::now();
        p.loop.on_complete(started, now, reply.getPayload().size() == p.payload.size());
        auto next = slot_loop(p, now);
        p.out.tick(p.loop, now);
        return next;
      },
      [this, &p, started](kj::Exception&& e) {
        if (!p.noted_error && p.loop.errors() == 0) {
          p.out.note(std::string("capnp call failed: ") + e.getDescription().cStr());
          p.noted_error = true;
        }
        if (e.getType() == kj::Exception::Type::DISCONNECTED) kj::throwFatalException(kj::mv(e));
        const auto now = clock::now();
        p.loop.on_complete(started, now, false);
        return slot_loop(p, now);
      });
}

kj::Promise<void> echo_client::watchdog(point& p) {
  return client_.getIoProvider().getTimer().afterDelay(200 * kj::MILLISECONDS).then([this, &p]() {
    const auto now = clock::now();
    if (now > p.loop.give_up_at()) KJ_FAIL_REQUIRE("Cap'n Proto benchmark point made no progress");
    p.out.tick(p.loop, now);
    return watchdog(p);
  });
}

bench_result echo_client::run_point(std::uint64_t payload, std::uint64_t concurrency, const load_spec& load,
                                    progress& out) {
  auto result = point_result("capnp", "tcp", "event", payload, concurrency);

  const auto start = clock::now();
  point p{closed_loop(load, start), out, std::vector<capnp::byte>(payload, 'x'),
          capnp::MessageSize{payload / sizeof(capnp::word) + 8, 0}};
  out.begin(point_label(result), start);
  auto slots = kj::heapArrayBuilder<kj::Promise<void>>(concurrency);
  for (std::uint64_t i = 0; i < concurrency; ++i) slots.add(slot_loop(p, clock::now()));
  try {
    kj::joinPromises(slots.finish()).exclusiveJoin(watchdog(p)).wait(client_.getWaitScope());
  } catch (const kj::Exception& e) {
    throw std::runtime_error(e.getDescription().cStr());
  }
  fill_from(result, p.loop, clock::now());
  out.end(result);
  return result;
}

void echo_client::idle(std::chrono::nanoseconds duration) {
  client_.getIoProvider()
      .getTimer()
      .afterDelay(duration.count() * kj::NANOSECONDS)
      .wait(client_.getWaitScope());
}

}  // namespace rdmarpc::bench::capnp_baseline
