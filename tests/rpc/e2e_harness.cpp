#include "e2e_harness.hpp"

#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>

namespace rdmarpc::test {

std::string listen_uri(const std::string& target) {
  if (target == "tcp") return "tcp://127.0.0.1:0";
  if (target == "rdma") {
    const char* addr = std::getenv("RDMARPC_TEST_RDMA_ADDR");
    return std::string("rdma://") + (addr != nullptr ? addr : "10.0.0.1") + ":0";
  }
  return {};
}

io_thread::io_thread() : guard_(io_.get_executor()), done_future_(done_.get_future()) {
  thread_ = std::thread([this] {
    io_.run();
    done_.set_value();
  });
}

io_thread::~io_thread() {
  if (guard_) drain();
  thread_.join();
}

bool io_thread::drain(std::chrono::milliseconds timeout) {
  guard_.reset();
  if (done_future_.wait_for(timeout) == std::future_status::ready) return true;
  io_.stop();
  return false;
}

e2e_harness::e2e_harness(std::string target, server_options options) : target_(std::move(target)) {
  options = with_relaxed_liveness(std::move(options));
  server_ptr_ = std::make_unique<rdmarpc::server>(server_io_.executor(), std::move(options));
  server_ = server_ptr_.get();
  server_->add_service(svc_);
  if (!is_loopback()) uri_ = server_->listen(listen_uri(target_)).to_uri();
}

e2e_harness::~e2e_harness() {
  server_ptr_.reset();  // closes listeners and connections (posted to the server's io thread)
  const bool client_ok = client_io_.drain();
  const bool server_ok = server_io_.drain();
  drained_ = client_ok && server_ok;
  CHECK(client_ok);
  CHECK(server_ok);
}

std::shared_ptr<channel> e2e_harness::make_channel(channel_options options,
                                                   transport::loopback::loopback_faults client_to_server,
                                                   transport::loopback::loopback_faults server_to_client) {
  options = with_relaxed_liveness(std::move(options));
  if (!is_loopback()) return channel::create(client_io_.executor(), uri_, std::move(options));
  transport::loopback::loopback_options lo;
  lo.connection = options.transport;
  lo.a_to_b = client_to_server;
  lo.b_to_a = server_to_client;
  auto [client_end, server_end] =
      transport::loopback::make_loopback_pair(client_io_.executor(), server_io_.executor(), lo);
  server_->serve(server_end);
  return channel::create(client_end, std::move(options));
}

bool e2e_harness::shutdown(std::chrono::steady_clock::duration grace, std::chrono::milliseconds timeout) {
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  server_->async_shutdown(grace, [done] { done->set_value(); });
  return fut.wait_for(timeout) == std::future_status::ready;
}

std::future<call_result> start_call(channel& ch, const method_descriptor& method, const EchoRequest& req,
                                    client_context* ctx) {
  std::promise<call_result> p;
  auto f = p.get_future();
  const auto start = std::chrono::steady_clock::now();
  async_unary_call<EchoReply>(
      ch, method, ctx, req, [p = std::move(p), start](boost::system::error_code ec, EchoReply reply) mutable {
        const auto now = std::chrono::steady_clock::now();
        p.set_value({ec, std::move(reply), now - start, now});
      });
  return f;
}

call_result call(channel& ch, const method_descriptor& method, const EchoRequest& req, client_context* ctx,
                 std::chrono::milliseconds timeout) {
  auto f = start_call(ch, method, req, ctx);
  REQUIRE(f.wait_for(timeout) == std::future_status::ready);
  return f.get();
}

EchoRequest make_request(std::string data, std::uint32_t sleep_ms) {
  EchoRequest r;
  r.set_data(std::move(data));
  r.set_sleep_ms(sleep_ms);
  return r;
}

}  // namespace rdmarpc::test
