#pragma once
// Test fixture for the built-in services: one server with health, reflection, a generated service
// (svctest.Counter) and a hand-written one without descriptors (rdmarpc.test.Test), over a named
// target ("loopback", "tcp", "rdma"); clients on their own io thread. Helpers wait for client
// operations with a bound, so a hang fails the test instead of stalling it.
// Threading: the test body runs on the main thread; server and clients run on their io threads.

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "e2e_harness.hpp"
#include "grpc/health/v1/health.rdmarpc.pb.h"
#include "grpc/reflection/v1/reflection.rdmarpc.pb.h"
#include "services/health_service.hpp"
#include "services/reflection_service.hpp"
#include "svctest/counter.rdmarpc.pb.h"

namespace rdmarpc::test {

inline constexpr std::chrono::seconds kWait{20};

class counter_service final : public svctest::Counter::Service {
 public:
  boost::asio::awaitable<svctest::Item> add(server_context&, const svctest::AddRequest& request) override;
  boost::asio::awaitable<void> follow(server_context&, const svctest::AddRequest& request,
                                      server_writer<svctest::Item>& out) override;
};

class services_fixture {
 public:
  explicit services_fixture(std::string target, channel_options client_options = {});
  ~services_fixture();

  const std::string& target() const noexcept { return target_; }
  rdmarpc::server& server() { return *server_; }
  services::health_service& health() { return health_; }
  const std::shared_ptr<channel>& client() const noexcept { return channel_; }
  std::shared_ptr<channel> make_channel(channel_options options = {});

  // Graceful shutdown; false when it did not complete within `timeout`.
  bool shutdown(std::chrono::steady_clock::duration grace, std::chrono::milliseconds timeout);

 private:
  std::string target_;
  std::string uri_;
  counter_service counter_;
  test_service hand_written_;
  services::health_service health_;
  services::reflection_service reflection_;
  io_thread server_io_;
  io_thread client_io_;
  std::unique_ptr<rdmarpc::server> server_;
  std::shared_ptr<channel> channel_;
};

// Waits (bounded) for an operation started with a callback token and returns its result.
template <typename... Results>
class waiter {
 public:
  auto handler() {
    return [p = std::make_shared<std::promise<std::tuple<Results...>>>(std::move(promise_))](Results... r) {
      p->set_value(std::tuple<Results...>(std::move(r)...));
    };
  }
  std::optional<std::tuple<Results...>> get(std::chrono::milliseconds timeout = kWait) {
    if (future_.wait_for(timeout) != std::future_status::ready) return std::nullopt;
    return future_.get();
  }

 private:
  std::promise<std::tuple<Results...>> promise_;
  std::future<std::tuple<Results...>> future_ = promise_.get_future();
};

// Reads one message (bounded wait); the error code (eof at the end of the stream).
template <typename Stream, typename Message>
boost::system::error_code read(Stream& stream, Message& message, std::chrono::milliseconds timeout = kWait) {
  waiter<boost::system::error_code> w;
  stream.async_read(message, w.handler());
  auto r = w.get(timeout);
  if (!r) return make_error_code(boost::system::errc::timed_out);
  return std::get<0>(*r);
}
template <typename Stream, typename Message>
boost::system::error_code write(Stream& stream, const Message& message) {
  waiter<boost::system::error_code> w;
  stream.async_write(message, w.handler());
  auto r = w.get();
  if (!r) return make_error_code(boost::system::errc::timed_out);
  return std::get<0>(*r);
}
template <typename Stream>
boost::system::error_code finish(Stream& stream) {
  waiter<boost::system::error_code> w;
  stream.async_finish(w.handler());
  auto r = w.get();
  if (!r) return make_error_code(boost::system::errc::timed_out);
  return std::get<0>(*r);
}
template <typename Stream>
boost::system::error_code writes_done(Stream& stream) {
  waiter<boost::system::error_code> w;
  stream.async_writes_done(w.handler());
  auto r = w.get();
  if (!r) return make_error_code(boost::system::errc::timed_out);
  return std::get<0>(*r);
}

// Polls `predicate` until it holds or `timeout` passes.
template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds timeout = kWait) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace rdmarpc::test
