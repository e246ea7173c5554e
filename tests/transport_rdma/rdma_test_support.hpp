#pragma once
// Helpers for the rdma transport tests: a recording connection handler, bounded event-loop waits,
// and connecting a client/server pair over rdma_cm on one io_context.
// Layer: tests. Threading: everything runs on the test's io_context thread.

#include <arpa/inet.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "transport/connection.hpp"
#include "transport/rdma/rdma_transport.hpp"

namespace rdmarpc::rdma_test {

inline constexpr const char* kRdmaHost = "10.0.0.1";

struct recorder final : transport::connection_handler {
  // When set, called for every message instead of copying and releasing it.
  std::function<void(transport::received_message&)> on_each;
  std::vector<std::vector<std::byte>> messages;
  std::optional<boost::system::error_code> closed;
  std::chrono::steady_clock::time_point closed_at;

  void on_message(transport::received_message message) override {
    if (on_each) {
      on_each(message);
      return;
    }
    messages.emplace_back(message.bytes().begin(), message.bytes().end());
  }
  void on_close(const boost::system::error_code& reason) override {
    closed = reason;
    closed_at = std::chrono::steady_clock::now();
  }
};

// Runs `io` until `done()` or `limit` passes; returns done().
template <typename Pred>
bool run_until(boost::asio::io_context& io, Pred done,
               std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(20));
  }
  return true;
}

inline transport::endpoint rdma_endpoint(std::uint16_t port, const char* host = kRdmaHost) {
  return transport::endpoint{transport::scheme::rdma, host, port};
}

struct connected_pair {
  std::unique_ptr<transport::listener> listener;
  std::shared_ptr<transport::connection> client;
  std::shared_ptr<transport::connection> server;
  std::shared_ptr<recorder> client_rec = std::make_shared<recorder>();
  std::shared_ptr<recorder> server_rec = std::make_shared<recorder>();
};

// Listens on `host`:`port`, connects one client and accepts it. Does not start() either side.
inline connected_pair connect_pair(boost::asio::io_context& io, std::uint16_t port,
                                   const transport::connection_options& client_options = {},
                                   const transport::connection_options& server_options = {},
                                   const char* host = kRdmaHost) {
  connected_pair p;
  p.listener = transport::rdma::make_listener(io.get_executor(), rdma_endpoint(port, host), server_options);
  boost::system::error_code accept_ec, connect_ec;
  bool accepted = false, connected = false;
  p.listener->async_accept(io.get_executor(),
                           [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             accept_ec = ec;
                             p.server = std::move(c);
                             accepted = true;
                           });
  transport::rdma::async_connect(io.get_executor(), rdma_endpoint(port, host), client_options,
                                 [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                                   connect_ec = ec;
                                   p.client = std::move(c);
                                   connected = true;
                                 });
  run_until(io, [&] { return accepted && connected; });
  if (connect_ec || accept_ec || !p.client || !p.server) {
    throw boost::system::system_error(connect_ec ? connect_ec : accept_ec, "connect_pair");
  }
  return p;
}

inline std::vector<std::byte> pattern(std::size_t size, unsigned seed) {
  std::vector<std::byte> v(size);
  for (std::size_t i = 0; i < size; ++i)
    v[i] = static_cast<std::byte>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  return v;
}

// Waits (running `io` meanwhile, the listener lives there) for the next event on a raw channel.
inline rdma_cm_event_type next_raw_event(boost::asio::io_context& io, rdma_event_channel* ch) {
  rdma_cm_event* event = nullptr;
  const bool got = run_until(
      io, [&] { return rdma_get_cm_event(ch, &event) == 0; }, std::chrono::seconds(10));
  if (!got) return static_cast<rdma_cm_event_type>(-1);
  const auto type = event->event;
  rdma_ack_cm_event(event);
  return type;
}

// A raw rdma_cm id on a non-blocking channel of its own, resolved to rxe0's `port`.
inline void resolve_raw(boost::asio::io_context& io, std::uint16_t port, rdma_event_channel*& ch,
                        rdma_cm_id*& id) {
  ch = rdma_create_event_channel();
  REQUIRE(ch != nullptr);
  REQUIRE(::fcntl(ch->fd, F_SETFL, ::fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0);
  REQUIRE(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  REQUIRE(::inet_pton(AF_INET, kRdmaHost, &addr.sin_addr) == 1);
  REQUIRE(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&addr), 2000) == 0);
  REQUIRE(next_raw_event(io, ch) == RDMA_CM_EVENT_ADDR_RESOLVED);
  REQUIRE(rdma_resolve_route(id, 2000) == 0);
  REQUIRE(next_raw_event(io, ch) == RDMA_CM_EVENT_ROUTE_RESOLVED);
}

}  // namespace rdmarpc::rdma_test
