// The server's connection limits over the loopback transport (every loopback client's address is
// "loopback://a", so they all count as one peer): a connection beyond max_connections or
// max_connections_per_peer is closed at once and its calls fail UNAVAILABLE, the others carry on,
// and a slot freed by a closed connection serves the next one.
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <vector>

#include "rpc/channel.hpp"
#include "rpc/server.hpp"
#include "rpc/unary_call.hpp"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"  // run_until
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;

namespace {

struct limited_server {
  boost::asio::io_context io{1};
  test::test_service service;
  std::optional<server> srv;

  explicit limited_server(server_options options) {
    srv.emplace(io.get_executor(), options);
    srv->add_service(service);
  }
  ~limited_server() {
    srv.reset();
    io.restart();
    io.run_for(std::chrono::seconds(10));
  }

  std::shared_ptr<channel> connect() {
    auto [client_end, server_end] =
        transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
    srv->serve(server_end);
    return channel::create(client_end);
  }

  status_code echo(channel& ch) {
    std::optional<boost::system::error_code> out;
    test::EchoRequest req;
    req.set_data("x");
    async_unary_call<test::EchoReply>(ch, test::test_service::echo, nullptr, req,
                                      [&](boost::system::error_code ec, test::EchoReply) { out = ec; });
    REQUIRE(test::run_until(io, [&] { return out.has_value(); }));
    return to_status_code(*out);
  }
};

}  // namespace

TEST_CASE("server: a connection beyond max_connections is closed - the others carry on", "[server][limits]") {
  server_options options;
  options.max_connections = 2;
  limited_server s(options);
  auto first = s.connect();
  auto second = s.connect();
  auto third = s.connect();
  CHECK(s.echo(*first) == status_code::ok);
  CHECK(s.echo(*second) == status_code::ok);
  CHECK(s.echo(*third) == status_code::unavailable);
  CHECK(s.echo(*first) == status_code::ok);
  // A closed connection frees its slot.
  first->close();
  first.reset();
  REQUIRE(test::run_until(s.io, [&] {
    auto next = s.connect();
    return s.echo(*next) == status_code::ok;
  }));
}

TEST_CASE("server: max_connections_per_peer bounds one peer address", "[server][limits]") {
  server_options options;
  options.max_connections_per_peer = 1;
  limited_server s(options);
  auto first = s.connect();
  auto second = s.connect();  // the same peer ("loopback://a")
  CHECK(s.echo(*first) == status_code::ok);
  CHECK(s.echo(*second) == status_code::unavailable);
}
