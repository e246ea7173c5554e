#include "services_fixture.hpp"

#include <catch2/catch.hpp>

namespace rdmarpc::test {

boost::asio::awaitable<svctest::Item> counter_service::add(server_context&,
                                                           const svctest::AddRequest& request) {
  svctest::Item item;
  item.set_name(request.name());
  item.set_value(request.delta());
  co_return item;
}

boost::asio::awaitable<void> counter_service::follow(server_context&, const svctest::AddRequest& request,
                                                     server_writer<svctest::Item>& out) {
  svctest::Item item;
  item.set_name(request.name());
  co_await out.async_write(item, boost::asio::use_awaitable);
}

services_fixture::services_fixture(std::string target, channel_options client_options)
    : target_(std::move(target)) {
  server_options options;
  options.metrics = true;  // for the admin service's per-method figures
  server_ = std::make_unique<rdmarpc::server>(server_io_.executor(), with_relaxed_liveness(options));
  server_->add_service(counter_);
  server_->add_service(hand_written_);
  // The one line each a user writes.
  server_->add_service(health_);
  reflection_.add_to(*server_);
  admin_.add_to(*server_);
  if (target_ != "loopback") uri_ = server_->listen(listen_uri(target_)).to_uri();
  channel_ = make_channel(std::move(client_options));
}

services_fixture::~services_fixture() {
  channel_.reset();
  server_.reset();  // closes listeners and connections (posted to the server's io thread)
  CHECK(client_io_.drain());
  CHECK(server_io_.drain());
}

std::shared_ptr<channel> services_fixture::make_channel(channel_options options) {
  options = with_relaxed_liveness(std::move(options));
  if (target_ != "loopback") return channel::create(client_io_.executor(), uri_, std::move(options));
  transport::loopback::loopback_options lo;
  lo.connection = options.transport;
  auto [client_end, server_end] =
      transport::loopback::make_loopback_pair(client_io_.executor(), server_io_.executor(), lo);
  server_->serve(server_end);
  return channel::create(client_end, std::move(options));
}

bool services_fixture::shutdown(std::chrono::steady_clock::duration grace,
                                std::chrono::milliseconds timeout) {
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  server_->async_shutdown(grace, [done] { done->set_value(); });
  return fut.wait_for(timeout) == std::future_status::ready;
}

}  // namespace rdmarpc::test
