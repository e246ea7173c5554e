#include "bench/capnp_baseline/echo_server.hpp"

#include <capnp/message.h>

#include <stdexcept>

#include "echo_bench.capnp.h"

namespace rdmarpc::bench::capnp_baseline {
namespace {

class echo_impl final : public EchoBench::Server {
 protected:
  kj::Promise<void> echo(EchoContext context) override {
    const auto payload = context.getParams().getPayload();
    // Sized up front so the reply's message is one segment, as the request's is.
    context.initResults(capnp::MessageSize{payload.size() / sizeof(capnp::word) + 8, 0}).setPayload(payload);
    return kj::READY_NOW;
  }
};

kj::Promise<void> make_shutdown_promise(kj::Own<kj::PromiseFulfiller<void>>& fulfiller) {
  auto paf = kj::newPromiseAndFulfiller<void>();
  fulfiller = kj::mv(paf.fulfiller);
  return kj::mv(paf.promise);
}

}  // namespace

echo_server::echo_server(const std::string& address)
    : server_(kj::heap<echo_impl>(), address.c_str()),
      executor_(kj::getCurrentThreadExecutor().addRef()),
      stopped_(make_shutdown_promise(shutdown_fulfiller_)) {
  try {
    port_ = server_.getPort().wait(server_.getWaitScope());
  } catch (const kj::Exception& e) {
    throw std::runtime_error("Cap'n Proto server cannot listen on " + address + ": " +
                             e.getDescription().cStr());
  }
}

echo_server::~echo_server() = default;

void echo_server::run() {
  stopped_.wait(server_.getWaitScope());
}

void echo_server::shutdown() {
  std::call_once(shutdown_once_,
                 [this] { executor_->executeSync([this] { shutdown_fulfiller_->fulfill(); }); });
}

}  // namespace rdmarpc::bench::capnp_baseline
