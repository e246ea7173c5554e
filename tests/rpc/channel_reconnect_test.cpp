// Channel behaviour across a reconnect, against a hand-driven raw TCP "server" on 127.0.0.1 so the
// test decides exactly what arrives and when. Everything runs on one io_context driven by the test
// thread; every wait is bounded.
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <vector>

#include "rpc/channel.hpp"
#include "rpc/frame.hpp"
#include "rpc/unary_call.hpp"
#include "rpc_test.pb.h"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"  // run_until
#include "tests/transport/raw_tcp.hpp"

using namespace rdmarpc;
using boost::asio::ip::tcp;
using test::le_length;
using test::run_until;

namespace {}  // namespace

TEST_CASE("channel: a protocol error while waiting for send-queue room does not stall the next connection",
          "[channel][tcp]") {
  boost::asio::io_context io(1);
  tcp::acceptor acceptor(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  const auto port = acceptor.local_endpoint().port();
  channel_options options;
  options.transport.send_queue_bytes = 1;  // the channel has to wait for room almost at once
  auto ch = channel::create(io.get_executor(), "tcp://127.0.0.1:" + std::to_string(port), options);

  // 1. Requests far larger than the socket buffers, to a peer that reads nothing: the transport's
  //    queue fills and the channel waits for room with most requests still unsent.
  constexpr int kBig = 16;
  const std::string big(1 << 20, 'x');
  std::vector<std::optional<boost::system::error_code>> big_results(kBig);
  tcp::socket first(io);
  bool accepted = false;
  acceptor.async_accept(first, [&](boost::system::error_code ec) { accepted = !ec; });
  for (int i = 0; i < kBig; ++i) {
    test::EchoRequest req;
    req.set_data(big);
    async_unary_call<test::EchoReply>(
        *ch, test::test_service::echo, nullptr, req,
        [&, i](boost::system::error_code ec, test::EchoReply) { big_results[i] = ec; });
  }
  REQUIRE(run_until(io, [&] { return accepted; }));
  // Let the channel and the kernel move all they can; then most of the 16 MiB is still unsent.
  for (int i = 0; i < 100; ++i) io.poll();
  CHECK(first.available() < static_cast<std::size_t>(kBig - 2) * big.size());
  int finished = 0;
  for (const auto& r : big_results) finished += r.has_value() ? 1 : 0;
  REQUIRE(finished == 0);

  // 2. The "server" answers with a frame that is no rpc frame: the channel closes the connection
  //    and fails every call on it.
  std::array<std::byte, 4 + 16> garbage{};
  const auto len = le_length(16);
  std::copy(len.begin(), len.end(), garbage.begin());
  std::fill(garbage.begin() + 4, garbage.end(), std::byte{0xAB});
  boost::asio::write(first, boost::asio::buffer(garbage));
  REQUIRE(run_until(io, [&] {
    for (const auto& r : big_results)
      if (!r) return false;
    return true;
  }));
  for (const auto& r : big_results) CHECK(to_status_code(*r) == status_code::unavailable);

  // 3. The next call reconnects (it waits for ready: the endpoint failed, so a fail-fast call would
  //    fail during the reconnect backoff), and its request must actually go out on the new
  //    connection.
  tcp::socket second(io);
  accepted = false;
  acceptor.async_accept(second, [&](boost::system::error_code ec) { accepted = !ec; });
  client_context ctx;
  ctx.set_timeout(std::chrono::seconds(10));
  ctx.set_wait_for_ready(true);
  test::EchoRequest small;
  small.set_data("after the reconnect");
  std::optional<boost::system::error_code> result;
  async_unary_call<test::EchoReply>(*ch, test::test_service::echo, &ctx, small,
                                    [&](boost::system::error_code ec, test::EchoReply) { result = ec; });
  REQUIRE(run_until(io, [&] { return accepted; }));
  std::array<std::byte, 4> length_bytes{};
  std::vector<std::byte> request;
  bool got_request = false;
  boost::asio::async_read(
      second, boost::asio::buffer(length_bytes), [&](boost::system::error_code ec, std::size_t) {
        REQUIRE_FALSE(ec);
        std::uint32_t n = 0;
        for (int i = 0; i < 4; ++i) n |= std::to_integer<std::uint32_t>(length_bytes[i]) << (8 * i);
        request.resize(n);
        boost::asio::async_read(second, boost::asio::buffer(request),
                                [&](boost::system::error_code ec2, std::size_t) { got_request = !ec2; });
      });
  REQUIRE(run_until(io, [&] { return got_request || result.has_value(); }));
  REQUIRE(got_request);  // with the bug the channel never sent it (and the call timed out)
  frame::decode_error err{};
  const auto v = frame::decode(request, err);
  REQUIRE(err == frame::decode_error::none);
  CHECK(v.header.kind == frame::kind::request);

  // An empty OK response (EchoReply{} serializes to nothing) completes the call.
  frame::header h;
  h.kind = frame::kind::response;
  h.call_id = v.header.call_id;
  std::vector<std::byte> bytes(frame::header_size(h));
  frame::encode_header(h, bytes);
  const std::vector<std::byte>& head = bytes;
  const auto head_len = le_length(static_cast<std::uint32_t>(head.size()));
  boost::asio::write(second, std::array{boost::asio::buffer(head_len), boost::asio::buffer(head)});
  REQUIRE(run_until(io, [&] { return result.has_value(); }));
  CHECK_FALSE(*result);
  ch->close();
  run_until(
      io, [&] { return false; }, std::chrono::milliseconds(50));
}
