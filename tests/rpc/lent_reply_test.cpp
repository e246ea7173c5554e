// Replies lent to handlers: a unary call that completes on the channel's own io_context hands its
// handler a reply message the channel keeps, one per reply type (unary_op::complete_lent). These
// tests check what a handler can see of it: exactly its own call's reply, whatever came before;
// calls in flight together share it; a reply it moves out stays its own; replies of different
// types never share a message; and a handler on a strand gets its own call's reply. Client and server share
// one io_context on the test thread, over the loopback transport; every wait is bounded.
#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "rpc/channel.hpp"
#include "rpc/server.hpp"
#include "rpc/unary_call.hpp"
#include "rpc_test.pb.h"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"  // run_until
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;
using test::EchoReply;
using test::EchoRequest;

namespace {

struct loopback_pair {
  boost::asio::io_context io{1};
  test::test_service service;
  server srv{io.get_executor(), server_options{}};
  std::shared_ptr<channel> ch;

  loopback_pair() {
    srv.add_service(service);
    auto [client_end, server_end] =
        transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
    srv.serve(server_end);
    ch = channel::create(client_end);
  }
  ~loopback_pair() {
    ch.reset();
    io.restart();
    io.run_for(std::chrono::seconds(5));
  }
};

EchoRequest echo_of(std::size_t bytes, char fill) {
  EchoRequest request;
  request.set_data(std::string(bytes, fill));
  return request;
}

}  // namespace

TEST_CASE("a handler reading the reply by reference sees only its own call's reply", "[lent]") {
  loopback_pair p;
  // Shrinking and growing replies, one after another: a reused message must not show the bytes of
  // a longer reply before it.
  const std::vector<std::pair<std::size_t, char>> calls{
      {100, 'a'}, {10, 'b'}, {0, 'c'}, {300, 'd'}, {1, 'e'}};
  std::vector<std::string> seen;
  for (const auto& [bytes, fill] : calls) {
    bool done = false;
    async_unary_call<EchoReply>(*p.ch, test::test_service::echo, nullptr, echo_of(bytes, fill),
                                [&](boost::system::error_code ec, const EchoReply& reply) {
                                  CHECK_FALSE(ec);
                                  seen.push_back(reply.data());
                                  done = true;
                                });
    REQUIRE(test::run_until(p.io, [&] { return done; }));
  }
  REQUIRE(seen.size() == calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i)
    CHECK(seen[i] == std::string(calls[i].first, calls[i].second));
}

TEST_CASE("calls in flight together are handed the channel's one reply message, in turn", "[lent]") {
  loopback_pair p;
  // Two calls at once have two ops (two messages of their own): both handlers reading the same
  // message shows it is the channel's, lent to each in turn (what makes the calls allocate nothing;
  // allocation_test counts that).
  std::vector<const EchoReply*> addresses;
  std::vector<std::string> seen;
  for (char fill : {'p', 'q', 'r'}) {
    async_unary_call<EchoReply>(*p.ch, test::test_service::echo, nullptr, echo_of(64, fill),
                                [&](boost::system::error_code ec, const EchoReply& reply) {
                                  CHECK_FALSE(ec);
                                  addresses.push_back(&reply);
                                  seen.push_back(reply.data());
                                });
  }
  REQUIRE(test::run_until(p.io, [&] { return seen.size() == 3; }));
  CHECK(addresses[1] == addresses[0]);
  CHECK(addresses[2] == addresses[0]);
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::string>{std::string(64, 'p'), std::string(64, 'q'), std::string(64, 'r')});
}

TEST_CASE("a reply the handler moves out stays its own after later calls", "[lent]") {
  loopback_pair p;
  std::optional<EchoReply> kept;
  bool done = false;
  async_unary_call<EchoReply>(*p.ch, test::test_service::echo, nullptr, echo_of(64, 'k'),
                              [&](boost::system::error_code ec, EchoReply reply) {
                                CHECK_FALSE(ec);
                                kept = std::move(reply);
                                done = true;
                              });
  REQUIRE(test::run_until(p.io, [&] { return done; }));
  for (char fill : {'x', 'y'}) {
    done = false;
    async_unary_call<EchoReply>(*p.ch, test::test_service::echo, nullptr, echo_of(64, fill),
                                [&](boost::system::error_code ec, const EchoReply& reply) {
                                  CHECK_FALSE(ec);
                                  CHECK(reply.data() == std::string(64, fill));
                                  done = true;
                                });
    REQUIRE(test::run_until(p.io, [&] { return done; }));
  }
  REQUIRE(kept.has_value());
  CHECK(kept->data() == std::string(64, 'k'));
}

TEST_CASE("replies of different types on one channel are parsed into messages of their own type", "[lent]") {
  loopback_pair p;
  // The same method read as two reply types: EchoReply, and RawRequest (whose field 3 the echo's
  // reply does not have: its bytes land in the unknown fields). Alternating, each handler must see
  // a message of the type it asked for with its own call's content.
  int done = 0;
  for (int round = 0; round < 3; ++round) {
    const char fill = static_cast<char>('a' + round);
    async_unary_call<EchoReply>(*p.ch, test::test_service::echo, nullptr, echo_of(32, fill),
                                [&, fill](boost::system::error_code ec, const EchoReply& reply) {
                                  CHECK_FALSE(ec);
                                  CHECK(reply.GetTypeName() == "rdmarpc.test.EchoReply");
                                  CHECK(reply.data() == std::string(32, fill));
                                  ++done;
                                });
    async_unary_call<test::RawRequest>(*p.ch, test::test_service::echo, nullptr, echo_of(48, fill),
                                       [&](boost::system::error_code ec, const test::RawRequest& reply) {
                                         CHECK_FALSE(ec);
                                         CHECK(reply.GetTypeName() == "rdmarpc.test.RawRequest");
                                         CHECK(reply.text().empty());
                                         // field 1 (tag 1 byte, length 1 byte) and the 48 bytes
                                         CHECK(reply.ByteSizeLong() == 50);
                                         ++done;
                                       });
    REQUIRE(test::run_until(p.io, [&] { return done == 2 * (round + 1); }));
  }
}

TEST_CASE("a handler on a strand gets its own call's reply", "[lent]") {
  loopback_pair p;
  auto strand = boost::asio::make_strand(p.io);
  int done = 0;
  // Completed through the strand, not in place: the channel parses into the call's own message.
  for (char fill : {'s', 't'}) {
    async_unary_call<EchoReply>(
        *p.ch, test::test_service::echo, nullptr, echo_of(64, fill),
        boost::asio::bind_executor(strand, [&, fill](boost::system::error_code ec, const EchoReply& reply) {
          CHECK_FALSE(ec);
          CHECK(reply.data() == std::string(64, fill));
          ++done;
        }));
    REQUIRE(test::run_until(p.io, [&, want = done + 1] { return done == want; }));
  }
}

TEST_CASE("only replies of up to 4 KiB on the wire are lent", "[lent]") {
  loopback_pair p;
  // An EchoReply with N bytes of data is N + 3 bytes on the wire (tag, two-byte length) from 128 on.
  std::vector<std::pair<std::size_t, const EchoReply*>> seen;
  for (const std::size_t data : {std::size_t{64}, std::size_t{4093}, std::size_t{4094}}) {
    async_unary_call<EchoReply>(*p.ch, test::test_service::echo, nullptr, echo_of(data, 'z'),
                                [&, data](boost::system::error_code ec, const EchoReply& reply) {
                                  CHECK_FALSE(ec);
                                  CHECK(reply.data() == std::string(data, 'z'));
                                  seen.emplace_back(reply.ByteSizeLong(), &reply);
                                });
  }
  REQUIRE(test::run_until(p.io, [&] { return seen.size() == 3; }));
  std::sort(seen.begin(), seen.end());
  REQUIRE(seen[1].first == 4096);
  REQUIRE(seen[2].first == 4097);
  CHECK(seen[1].second == seen[0].second);  // lent: the channel's message
  CHECK(seen[2].second != seen[0].second);  // one byte more: the call's own
}

TEST_CASE("a handler that throws leaves the reply message lendable", "[lent]") {
  loopback_pair p;
  const EchoReply* first = nullptr;
  bool thrown = false;
  async_unary_call<EchoReply>(*p.ch, test::test_service::echo, nullptr, echo_of(64, 'u'),
                              [&](boost::system::error_code, const EchoReply& reply) {
                                first = &reply;
                                throw std::runtime_error("handler failed");
                              });
  // The exception comes out of run() (posted from the delivery), as any handler's would.
  try {
    test::run_until(
        p.io, [] { return false; }, std::chrono::seconds(10));
  } catch (const std::runtime_error& e) {
    thrown = std::string(e.what()) == "handler failed";
  }
  REQUIRE(thrown);
  REQUIRE(first != nullptr);
  const EchoReply* second = nullptr;
  async_unary_call<EchoReply>(*p.ch, test::test_service::echo, nullptr, echo_of(64, 'v'),
                              [&](boost::system::error_code ec, const EchoReply& reply) {
                                CHECK_FALSE(ec);
                                CHECK(reply.data() == std::string(64, 'v'));
                                second = &reply;
                              });
  REQUIRE(test::run_until(p.io, [&] { return second != nullptr; }));
  CHECK(second == first);  // lent again: its flag was reset when the handler's exception left it
}
