#pragma once
// Test harness for the rpc end-to-end suite: one server (test_service) and any number of client
// channels over a named target transport ("loopback", "tcp", "rdma"), each side on its own
// io_context thread. The same cases run over every target (see e2e_test.cpp); each test binary
// says which targets it runs through e2e_targets(). Threading: the test body runs on the main
// thread and talks to the io threads only through futures and bounded waits.

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rpc/channel.hpp"
#include "rpc/server.hpp"
#include "rpc/unary_call.hpp"
#include "test_service.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace rdmarpc::test {

// Defined once per test binary: the targets its e2e cases run over.
std::vector<std::string> e2e_targets();

// The listen URI for a target ("tcp://127.0.0.1:0", "rdma://10.0.0.1:0").
std::string listen_uri(const std::string& target);

// An io_context run by its own thread until the harness drains it (bounded join).
class io_thread {
 public:
  io_thread();
  ~io_thread();
  boost::asio::io_context& io() noexcept { return io_; }
  boost::asio::any_io_executor executor() { return io_.get_executor(); }
  // Lets run() return once out of work; false if that did not happen within `timeout` (then the
  // context is stopped so nothing hangs).
  bool drain(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  // Run by one thread, without the reactor's per-descriptor locks: what README recommends for
  // such io_contexts, and what rdmarpc must keep safe (TSan runs these tests).
  boost::asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::promise<void> done_;
  std::future<void> done_future_;
  std::thread thread_;
};

class e2e_harness {
 public:
  explicit e2e_harness(std::string target, server_options options = {});
  ~e2e_harness();

  const std::string& target() const noexcept { return target_; }
  bool is_loopback() const noexcept { return target_ == "loopback"; }
  const std::string& uri() const noexcept { return uri_; }  // empty for loopback
  rdmarpc::server& server() { return *server_; }
  test_service& service() { return svc_; }
  boost::asio::any_io_executor client_executor() { return client_io_.executor(); }
  boost::asio::any_io_executor server_executor() { return server_io_.executor(); }

  // A new channel with its own connection. Faults only apply to loopback.
  std::shared_ptr<channel> make_channel(channel_options options = {},
                                        transport::loopback::loopback_faults client_to_server = {},
                                        transport::loopback::loopback_faults server_to_client = {});

  // Shuts the server down gracefully; false if the completion did not come within `timeout`.
  bool shutdown(std::chrono::steady_clock::duration grace,
                std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // True when both io threads drained (checked by the destructor too, via a failed CHECK).
  bool drained() const noexcept { return drained_; }

 private:
  std::string target_;
  std::string uri_;
  test_service svc_;  // outlives server_
  io_thread server_io_;
  io_thread client_io_;
  std::unique_ptr<rdmarpc::server> server_ptr_;
  rdmarpc::server* server_;
  bool drained_ = false;
};

// The result of one call, as seen by a callback handler.
struct call_result {
  boost::system::error_code ec;
  EchoReply reply;
  std::chrono::steady_clock::duration elapsed{};  // from start_call to the completion
  std::chrono::steady_clock::time_point completed_at{};
};

// Starts a unary call with a promise-fulfilling callback; the future is ready when it completes.
std::future<call_result> start_call(channel& ch, const method_descriptor& method, const EchoRequest& req,
                                    client_context* ctx = nullptr);
// Starts and waits (bounded: a call that does not complete in `timeout` fails the test).
call_result call(channel& ch, const method_descriptor& method, const EchoRequest& req,
                 client_context* ctx = nullptr, std::chrono::milliseconds timeout = std::chrono::seconds(30));

EchoRequest make_request(std::string data, std::uint32_t sleep_ms = 0);

// The suite's heartbeat timeout where a test leaves the default (heartbeat tests set their own).
// Under TCG with the sanitizers a side can be busy for longer than the default 300 ms, e.g. parsing
// or serializing a 4 MiB message, or a fresh process starting up, and a connection ended for that
// is not what these tests test. For channel_options and server_options.
inline constexpr std::chrono::seconds kRelaxedHeartbeatTimeout{5};
template <typename Options>
Options with_relaxed_liveness(Options options) {
  if (options.heartbeat_timeout == Options{}.heartbeat_timeout)
    options.heartbeat_timeout = kRelaxedHeartbeatTimeout;
  return options;
}

}  // namespace rdmarpc::test
