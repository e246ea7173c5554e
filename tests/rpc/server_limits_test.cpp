// The server's connection limits over the loopback transport (every loopback client's address is
// "loopback://a", so they all count as one peer): a connection beyond max_connections or
// max_connections_per_peer is closed at once and its calls fail UNAVAILABLE, the others carry on,
// and a slot freed by a closed connection serves the next one (over tcp too, with two peer
// addresses: 127.0.0.2 floods, 127.0.0.1 is served). And over tcp, what hostile
// connections announcing the largest message cost the server while an honest client is served.
#include <poll.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "e2e_harness.hpp"
#include "raw_frames.hpp"
#include "rpc/channel.hpp"
#include "rpc/server.hpp"
#include "rpc/unary_call.hpp"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"  // run_until
#include "tests/transport/raw_tcp.hpp"
#include "transport/endpoint.hpp"
#include "transport/loopback/loopback_transport.hpp"
#include "transport/tcp/tcp_framer.hpp"

using namespace rdmarpc;
using test::kResidentFactor;
using test::le_length;
using test::resident_bytes;

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

TEST_CASE(
    "server: a request beyond its method's max_request_bytes is refused RESOURCE_EXHAUSTED - the "
    "rest carries on",
    "[server][limits]") {
  server_options options;
  options.max_request_bytes_by_method = {{std::string(test::test_service::echo.full_name), 100}};
  limited_server s(options);
  auto ch = s.connect();
  auto other = s.connect();  // another client, served between the refusals
  const auto echo = [&](std::size_t data_bytes, const method_descriptor& method = test::test_service::echo) {
    std::optional<boost::system::error_code> out;
    test::EchoRequest req;
    req.set_data(std::string(data_bytes, 'x'));
    async_unary_call<test::EchoReply>(*ch, method, nullptr, req,
                                      [&](boost::system::error_code ec, test::EchoReply) { out = ec; });
    REQUIRE(test::run_until(s.io, [&] { return out.has_value(); }));
    return to_status_code(*out);
  };
  // A string field of n < 128 bytes serializes to n + 2.
  CHECK(echo(98) == status_code::ok);  // 100 bytes: at the bound
  CHECK(echo(99) == status_code::resource_exhausted);
  CHECK(s.echo(*other) == status_code::ok);
  CHECK(echo(4000) == status_code::resource_exhausted);
  CHECK(s.echo(*other) == status_code::ok);
  // The same connection carries on, and a method without a bound takes more.
  CHECK(echo(10) == status_code::ok);
  CHECK(echo(4000, test::test_service::meta) == status_code::ok);
  CHECK(s.echo(*s.connect()) == status_code::ok);
}

TEST_CASE("server: max_request_bytes_by_method naming no added method is refused when serving starts",
          "[server][limits]") {
  server_options options;
  options.max_request_bytes_by_method = {{"/rdmarpc.test.Test/Ech0", 100}};
  limited_server s(options);
  auto [client_end, server_end] =
      transport::loopback::make_loopback_pair(s.io.get_executor(), s.io.get_executor());
  CHECK_THROWS_WITH(s.srv->serve(server_end),
                    Catch::Contains("/rdmarpc.test.Test/Ech0, which no added service has"));
}

TEST_CASE(
    "rdma ring settings outside their limits fail listen and channel creation at once, naming the "
    "setting and its range, and tcp ignores them",
    "[server][limits]") {
  server_options bad_server;
  bad_server.transport.slot_size = 32;
  limited_server s(bad_server);
  // Checked before anything touches rdma_cm, so this holds on a machine without a device too.
  CHECK_THROWS_WITH(s.srv->listen("rdma://127.0.0.1:0"),
                    Catch::Contains("connection_options::slot_size = 32 is outside [64, 1048576]"));
  CHECK_NOTHROW(s.srv->listen("tcp://127.0.0.1:0"));  // rdma's settings are not tcp's

  const auto create_with = [&](std::string_view uri, auto change) {
    channel_options options;
    change(options.transport);
    channel::create(s.io.get_executor(), uri, options)->close();
  };
  CHECK_THROWS_WITH(create_with("rdma://10.0.0.1:7471", [](auto& t) { t.recv_ring_depth = 2; }),
                    Catch::Contains("recv_ring_depth = 2 is outside [4, 65535]"));
  CHECK_THROWS_WITH(create_with("rdma://10.0.0.1:7471,10.0.0.2:7471", [](auto& t) { t.signal_every = 0; }),
                    Catch::Contains("signal_every = 0 is outside [1, send_buffers = 128]"));
  CHECK_THROWS_WITH(create_with("rdma://10.0.0.1:7471", [](auto& t) { t.send_buffers = t.signal_every = 1; }),
                    Catch::Contains("send_buffers = 1 is outside [2, 65535]"));
  CHECK_THROWS_WITH(create_with("rdma://10.0.0.1:7471", [](auto& t) { t.send_buffers = 65536; }),
                    Catch::Contains("send_buffers = 65536 is outside [2, 65535]"));
  // Rings no budget could ever lease: 64 slots of 1 MiB each way, against a 64 MiB limit.
  CHECK_THROWS_WITH(create_with("rdma://10.0.0.1:7471",
                                [](auto& t) {
                                  t.slot_size = 1u << 20;
                                  t.recv_ring_depth = t.send_buffers = 64;
                                  t.registered_memory = transport::memory_budget::create(64u << 20);
                                }),
                    Catch::Contains("more than its limit of 67108864"));
  CHECK_NOTHROW(create_with("tcp://127.0.0.1:7471", [](auto& t) { t.recv_ring_depth = 2; }));
  CHECK_NOTHROW(create_with("rdma://10.0.0.1:7471", [](auto&) {}));  // the defaults pass
}

namespace {

boost::asio::ip::tcp::endpoint tcp_target(const test::e2e_harness& h) {
  return {boost::asio::ip::make_address("127.0.0.1"), transport::parse_endpoint(h.uri())->port};
}

// Of these sockets, how many the server has closed (EOF or reset), without blocking.
std::size_t count_closed_by_server(std::vector<boost::asio::ip::tcp::socket>& sockets) {
  std::size_t closed = 0;
  for (auto& s : sockets) {
    s.non_blocking(true);
    std::array<char, 1> byte{};
    boost::system::error_code ec;
    s.read_some(boost::asio::buffer(byte), ec);
    if (ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset) ++closed;
  }
  return closed;
}

// Echo requests with call ids FIRST..LAST asking for REPLY_BYTES-byte replies, as tcp frames.
std::string echo_requests(std::uint32_t first, std::uint32_t last, std::uint32_t reply_bytes) {
  std::string out;
  for (std::uint32_t id = first; id <= last; ++id) {
    test::EchoRequest req;
    req.set_reply_size(reply_bytes);
    frame::header header;
    header.kind = frame::kind::request;
    header.call_id = id;
    header.method_id = test::test_service::echo.id;
    const std::string bytes = test::encode_frame(header, {}, req.SerializeAsString());
    const auto length = le_length(static_cast<std::uint32_t>(bytes.size()));
    out.append(reinterpret_cast<const char*>(length.data()), length.size());
    out += bytes;
  }
  return out;
}

// Reads tcp frames from SOCKET until COUNT have arrived (or 60 s passed): their headers.
std::vector<frame::header> read_frames(boost::asio::ip::tcp::socket& socket, std::size_t count) {
  std::vector<frame::header> headers;
  std::vector<std::byte> pending;
  std::vector<std::byte> chunk(1 << 20);
  socket.non_blocking(true);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (headers.size() < count && std::chrono::steady_clock::now() < deadline) {
    boost::system::error_code ec;
    const std::size_t n = socket.read_some(boost::asio::buffer(chunk), ec);
    if (ec == boost::asio::error::would_block) {
      pollfd readable{socket.native_handle(), POLLIN, 0};
      ::poll(&readable, 1, 100);
      continue;
    }
    if (ec) break;
    pending.insert(pending.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n));
    while (pending.size() >= 4) {
      std::uint32_t length = 0;
      for (int b = 3; b >= 0; --b) length = (length << 8) | std::to_integer<std::uint32_t>(pending[b]);
      if (pending.size() < 4 + std::size_t{length}) break;
      frame::decode_error err{};
      const auto v = frame::decode(std::span<const std::byte>(pending.data() + 4, length), err);
      REQUIRE(err == frame::decode_error::none);
      headers.push_back(v.header);
      pending.erase(pending.begin(), pending.begin() + 4 + static_cast<std::ptrdiff_t>(length));
    }
  }
  return headers;
}

}  // namespace

// Issue 12's measurement: 200 connections each sending a 4-byte length announcing 16 MiB, then
// nothing, grew a server by 3.2 GB, and an honest client's calls failed meanwhile. A frame's memory
// now grows with the bytes that arrived, so each costs the server a socket and a read buffer.
TEST_CASE(
    "server: tcp connections announcing the largest message cost what arrived - an honest client "
    "is served meanwhile",
    "[server][limits]") {
  constexpr std::size_t kHostile = 100;
  constexpr std::uint32_t kAnnounced = (16u << 20) - 1;  // the largest the default maximum allows
  server_options options;
  options.heartbeat_interval = std::chrono::milliseconds(0);  // off: the silent peers stay connected
  test::e2e_harness h("tcp", options);
  auto honest = h.make_channel();
  REQUIRE_FALSE(test::call(*honest, test::test_service::echo, test::make_request("before")).ec);
  const std::size_t before = resident_bytes();

  boost::asio::io_context raw_io;
  const auto target = tcp_target(h);
  const auto header = le_length(kAnnounced);
  std::vector<boost::asio::ip::tcp::socket> hostile;
  for (std::size_t i = 0; i < kHostile; ++i) {
    auto& s = hostile.emplace_back(raw_io);
    s.connect(target);
    boost::asio::write(s, boost::asio::buffer(header));
  }
  REQUIRE(test::run_until(raw_io, [&] { return h.server().stats().connections == kHostile + 1; }));
  // The honest client's calls succeed while the announced frames wait for bytes that never come.
  for (int i = 0; i < 20; ++i) {
    const auto r = test::call(*honest, test::test_service::echo, test::make_request("during"));
    REQUIRE_FALSE(r.ec);
    CHECK(r.reply.data() == "during");
  }
  const std::size_t grown = resident_bytes() - std::min(before, resident_bytes());
  CAPTURE(grown);
  // Announced: 100 x 16 MiB = 1.6 GB. What each may cost: the framer's read buffer and the first
  // chunk of the body it waits for (320 KiB), plus 8 MiB of slack for everything else.
  constexpr std::size_t kPerConnection =
      transport::tcp::tcp_framer::kDefaultBufferSize + transport::tcp::tcp_framer::kDefaultBodyChunk;
  CHECK(grown < kResidentFactor * (kHostile * kPerConnection + (8u << 20)));
  CHECK(h.server().stats().connections == kHostile + 1);
  for (auto& s : hostile) s.close();
  REQUIRE(test::run_until(raw_io, [&] { return h.server().stats().connections == 1; }));
  CHECK_FALSE(test::call(*honest, test::test_service::echo, test::make_request("after")).ec);
}

// Issue 12's other measurement: one 15 MiB request frame of empty metadata entries (2 bytes each,
// ~60x larger once parsed) grew a server by 0.9 GB. Extras beyond max_metadata_bytes are now refused
// from the frame's header, before anything is parsed.
TEST_CASE(
    "server: a request of millions of empty metadata entries costs its bytes only - an honest "
    "client is served meanwhile",
    "[server][limits]") {
  server_options options;
  options.heartbeat_interval = std::chrono::milliseconds(0);  // the raw socket answers no pings
  test::e2e_harness h("tcp", options);
  auto honest = h.make_channel();
  REQUIRE_FALSE(test::call(*honest, test::test_service::echo, test::make_request("before")).ec);
  const std::size_t before = resident_bytes();

  std::string entries;
  entries.reserve(15u << 20);
  while (entries.size() < (15u << 20)) entries.append("\x0a\x00", 2);  // RequestExtras.metadata = {}
  frame::header request;
  request.kind = frame::kind::request;
  request.call_id = 1;
  request.method_id = test::test_service::echo.id;
  const std::string bytes = test::encode_frame(request, entries);
  boost::asio::io_context raw_io;
  boost::asio::ip::tcp::socket hostile(raw_io);
  hostile.connect(tcp_target(h));
  const auto length = le_length(static_cast<std::uint32_t>(bytes.size()));
  boost::asio::write(hostile, std::vector<boost::asio::const_buffer>{boost::asio::buffer(length),
                                                                     boost::asio::buffer(bytes)});
  for (int i = 0; i < 10; ++i) {
    const auto r = test::call(*honest, test::test_service::echo, test::make_request("during"));
    REQUIRE_FALSE(r.ec);
    CHECK(r.reply.data() == "during");
  }
  // The hostile call's answer: RESOURCE_EXHAUSTED for call 1 (the first frame the server sends it).
  std::array<std::byte, 4> answer_length{};
  boost::asio::read(hostile, boost::asio::buffer(answer_length));
  std::vector<std::byte> answer(std::to_integer<std::size_t>(answer_length[0]) |
                                std::to_integer<std::size_t>(answer_length[1]) << 8 |
                                std::to_integer<std::size_t>(answer_length[2]) << 16 |
                                std::to_integer<std::size_t>(answer_length[3]) << 24);
  boost::asio::read(hostile, boost::asio::buffer(answer));
  const auto response = test::find_frame({answer}, frame::kind::response, 1);
  REQUIRE(response.has_value());
  CHECK(response->status == status_code::resource_exhausted);
  const std::size_t grown = resident_bytes() - std::min(before, resident_bytes());
  CAPTURE(grown);
  // Before the limit: 0.9 GB. Now the frame's own 15 MiB (read, then freed) and slack.
  CHECK(grown < kResidentFactor * (64u << 20));
  CHECK_FALSE(test::call(*honest, test::test_service::echo, test::make_request("after")).ec);
}

// A client that sends requests and never reads a reply: the server holds at most
// max_in_flight_per_connection replies waiting for send room, and send_queue_bytes of frames
// queued. Requests beyond the in-flight bound are refused, and the refusals are queued like
// replies (once as many refusals wait for room as calls may be in flight, the reader is cut off:
// "peer does not read its responses"; whether 40,000 refusals get there depends on the kernel's
// socket buffers, so this test does not ask). Without the bounds this client's 40,000 requests for
// 1 MiB replies would cost 40 GB.
TEST_CASE(
    "server: a tcp client that never reads its replies costs at most its in-flight replies and send "
    "queue - an honest client is served meanwhile",
    "[server][limits]") {
  constexpr std::size_t kInFlight = 16;
  constexpr std::uint32_t kReplyBytes = 1u << 20;
  // Enough refusals to fill the send queue (~70 bytes each) and then wait.
  constexpr std::uint32_t kRequests = 40'000;
  server_options options;
  options.max_in_flight_per_connection = kInFlight;
  options.transport.send_queue_bytes = 1u << 20;
  options.heartbeat_interval = std::chrono::milliseconds(0);  // so silence is not why it ends
  test::e2e_harness h("tcp", options);
  auto honest = h.make_channel();
  REQUIRE_FALSE(test::call(*honest, test::test_service::echo, test::make_request("before")).ec);
  test::reset_peak_resident();
  const std::size_t before = resident_bytes();
  const auto accepted_before = h.server().stats().connections_accepted;

  const auto requests = [](std::uint32_t first, std::uint32_t last) {
    return echo_requests(first, last, kReplyBytes);
  };
  boost::asio::io_context raw_io;
  boost::asio::ip::tcp::socket hostile(raw_io);
  hostile.connect(tcp_target(h));
  REQUIRE(test::run_until(raw_io,
                          [&] { return h.server().stats().connections_accepted == accepted_before + 1; }));
  // As many requests as may be in flight: 16 MiB of replies, more than the kernel's socket buffers
  // and the send queue take, so replies wait; nothing is refused yet.
  boost::asio::write(hostile, boost::asio::buffer(requests(1, kInFlight)));
  for (int i = 0; i < 10; ++i) {
    const auto r = test::call(*honest, test::test_service::echo, test::make_request("during"));
    REQUIRE_FALSE(r.ec);
    CHECK(r.reply.data() == "during");
  }
  CHECK(h.server().stats().connections == 2);
  // The rest are refused. Wait until the server has seen every request, or cut the reader off.
  boost::asio::write(hostile, boost::asio::buffer(requests(kInFlight + 1, kRequests)));
  const auto all_seen = [&] {
    std::promise<std::vector<connection_figures>> figures;
    auto got = figures.get_future();
    h.server().async_connection_figures(
        [&figures](std::vector<connection_figures> all) { figures.set_value(std::move(all)); });
    for (const auto& c : got.get())
      if (c.calls_started > 1000) return c.calls_started == kRequests;  // the hostile one
    return true;                                                        // cut off
  };
  REQUIRE(test::run_until(raw_io, all_seen));
  for (int i = 0; i < 5; ++i)
    CHECK_FALSE(test::call(*honest, test::test_service::echo, test::make_request("still")).ec);
  CHECK(h.server().stats().heartbeat_timeouts == 0);
  const std::size_t grown = test::peak_resident_bytes() - std::min(before, test::peak_resident_bytes());
  CAPTURE(grown);
  // Each waiting reply (1 MiB) counted twice, for its message and its frame, the send queue, and
  // what went to the kernel's socket buffers (freed by then; ASan keeps it in its quarantine).
  const std::size_t bound = 2 * kInFlight * kReplyBytes + options.transport.send_queue_bytes + (16u << 20);
  CHECK(grown < kResidentFactor * bound);
  CHECK_FALSE(test::call(*honest, test::test_service::echo, test::make_request("after")).ec);
}

// A client that reads its replies slower than its calls finish: replies that find no send room
// wait, up to max_waiting_reply_bytes of them; each reply beyond gives way (RESOURCE_EXHAUSTED,
// its memory let go). The reader gets an answer for every call and the connection carries on.
// Memory: what the server still holds once every call finished is bounded by the limit (without
// it, every reply: 32 MiB here). The peak is bounded by max_in_flight_per_connection instead: the
// 32 requests arrive in one read, each handler runs to its co_return at once and holds its reply
// until its completion runs, and Asio posts a completion that finished without suspending (traced
// with heaptrack: 33.5 MiB of the peak are do_echo's replies).
using test::heap_bytes_in_use;
TEST_CASE(
    "server: replies beyond max_waiting_reply_bytes give way to RESOURCE_EXHAUSTED - a slow reader gets "
    "an answer for every call, the connection carries on",
    "[server][limits]") {
  constexpr std::uint32_t kReplyBytes = 1u << 20;
  constexpr std::uint32_t kRequests = 32;
  server_options options;
  options.max_in_flight_per_connection = kRequests;
  options.max_waiting_reply_bytes = 2 * kReplyBytes;
  options.transport.send_queue_bytes = kReplyBytes;
  options.transport.tcp_socket_buffer_bytes = 64u << 10;      // so room runs out after a reply or two
  options.heartbeat_interval = std::chrono::milliseconds(0);  // the raw socket answers no pings
  test::e2e_harness h("tcp", options);
  auto honest = h.make_channel();
  REQUIRE_FALSE(test::call(*honest, test::test_service::echo, test::make_request("before")).ec);
  const auto accepted_before = h.server().stats().connections_accepted;

  boost::asio::io_context raw_io;
  boost::asio::ip::tcp::socket reader(raw_io);
  reader.open(boost::asio::ip::tcp::v4());
  reader.set_option(boost::asio::socket_base::receive_buffer_size(64 << 10));
  const std::string requests = echo_requests(1, kRequests, kReplyBytes);
  test::reset_peak_resident();
  const std::size_t resident_before = resident_bytes();
  const std::size_t heap_before = heap_bytes_in_use();
  reader.connect(tcp_target(h));
  REQUIRE(test::run_until(raw_io,
                          [&] { return h.server().stats().connections_accepted == accepted_before + 1; }));
  boost::asio::write(reader, boost::asio::buffer(requests));
  // Every call has finished: its reply went out, waits (at most two: the bound) or gave way.
  const auto all_finished = [&] {
    std::promise<std::vector<connection_figures>> figures;
    auto got = figures.get_future();
    h.server().async_connection_figures(
        [&figures](std::vector<connection_figures> all) { figures.set_value(std::move(all)); });
    for (const auto& c : got.get())
      if (c.calls_started == kRequests) return c.calls_in_flight <= 2;
    return false;
  };
  REQUIRE(test::run_until(raw_io, all_finished));
  const std::size_t held = heap_bytes_in_use() - std::min(heap_before, heap_bytes_in_use());
  const std::size_t peak =
      test::peak_resident_bytes() - std::min(resident_before, test::peak_resident_bytes());
  CAPTURE(held, peak);
  // Held: the waiting replies, the send queue, the calls kept for reuse (4 a method, with their
  // replies' capacity) and 2 MiB of slack.
  CHECK(held <
        options.max_waiting_reply_bytes + options.transport.send_queue_bytes + 4 * kReplyBytes + (2u << 20));
  // Peak: a reply per call in flight, and 16 MiB of slack.
  CHECK(peak < kResidentFactor * (options.max_in_flight_per_connection * kReplyBytes + (16u << 20)));
  CHECK_FALSE(test::call(*honest, test::test_service::echo, test::make_request("during")).ec);

  const auto answers = read_frames(reader, kRequests);
  REQUIRE(answers.size() == kRequests);
  std::vector<bool> answered(kRequests + 1, false);
  std::size_t ok = 0, gave_way = 0;
  for (const auto& a : answers) {
    REQUIRE(a.kind == frame::kind::response);
    REQUIRE((a.call_id >= 1 && a.call_id <= kRequests));
    CHECK_FALSE(answered[a.call_id]);
    answered[a.call_id] = true;
    if (a.status == status_code::ok) {
      ++ok;
      CHECK(a.payload_length > kReplyBytes);
    } else {
      CHECK(a.status == status_code::resource_exhausted);
      ++gave_way;
    }
  }
  CHECK(ok >= 1);
  CHECK(gave_way > 0);
  CAPTURE(ok, gave_way);
  // The connection carries on: the next call is answered in full.
  boost::asio::write(reader, boost::asio::buffer(echo_requests(kRequests + 1, kRequests + 1, kReplyBytes)));
  const auto next = read_frames(reader, 1);
  REQUIRE(next.size() == 1);
  CHECK(next[0].call_id == kRequests + 1);
  CHECK(next[0].status == status_code::ok);
  CHECK(h.server().stats().connections == 2);
}

// Connection caps over tcp: a connection beyond max_connections is closed as soon as it is
// accepted, so 3x the cap in connections costs the server the cap in file descriptors.
TEST_CASE(
    "server: tcp connections beyond max_connections are closed at once - the server holds at most "
    "the cap in fds, and a client inside it is served",
    "[server][limits]") {
  constexpr std::size_t kCap = 8;
  server_options options;
  options.max_connections = kCap;
  options.heartbeat_interval = std::chrono::milliseconds(0);  // the raw sockets answer no pings
  test::e2e_harness h("tcp", options);
  auto honest = h.make_channel();
  REQUIRE_FALSE(test::call(*honest, test::test_service::echo, test::make_request("before")).ec);
  boost::asio::io_context raw_io;
  boost::asio::ip::tcp::socket probe(raw_io);
  probe.open(boost::asio::ip::tcp::v4());  // so raw_io's reactor (epoll, eventfd, timerfd) is counted
  const std::size_t fds_before = test::open_fds();

  std::vector<boost::asio::ip::tcp::socket> flood;
  for (std::size_t i = 0; i < 3 * kCap; ++i) flood.emplace_back(raw_io).connect(tcp_target(h));
  // The honest client holds one place: kCap - 1 of the flood are served, the rest closed.
  REQUIRE(test::run_until(raw_io, [&] { return h.server().stats().connections_refused == 2 * kCap + 1; }));
  CHECK(h.server().stats().connections == kCap);
  // Our own 3 x kCap client sockets, and the server's kCap - 1 new connections: the refused ones
  // hold no fd.
  const std::size_t fd_bound = fds_before + 3 * kCap + (kCap - 1);
  CAPTURE(fds_before, fd_bound);
  CHECK(test::run_until(
      raw_io, [&] { return test::open_fds() <= fd_bound; }, std::chrono::seconds(20)));
  CHECK(test::open_fds() == fd_bound);
  for (int i = 0; i < 5; ++i)
    CHECK_FALSE(test::call(*honest, test::test_service::echo, test::make_request("during")).ec);
  // Each refused socket sees the server's close; the served ones stay open.
  const auto closed_by_server = [&] { return count_closed_by_server(flood); };
  CHECK(test::run_until(
      raw_io, [&] { return closed_by_server() >= 2 * kCap + 1; }, std::chrono::seconds(20)));
  CHECK(closed_by_server() == 2 * kCap + 1);
}

TEST_CASE(
    "server: tcp connections from one address beyond max_connections_per_peer are closed - another "
    "address is served",
    "[server][limits]") {
  constexpr std::size_t kPerPeer = 2;
  constexpr std::size_t kFlood = 6;
  server_options options;
  options.max_connections_per_peer = kPerPeer;
  options.heartbeat_interval = std::chrono::milliseconds(0);  // the raw sockets answer no pings
  test::e2e_harness h("tcp", options);
  // The hostile peer connects from 127.0.0.2 (all of 127/8 is loopback on Linux).
  boost::asio::io_context raw_io;
  std::vector<boost::asio::ip::tcp::socket> flood;
  for (std::size_t i = 0; i < kFlood; ++i) {
    auto& s = flood.emplace_back(raw_io);
    s.open(boost::asio::ip::tcp::v4());
    s.bind({boost::asio::ip::make_address("127.0.0.2"), 0});
    s.connect(tcp_target(h));
  }
  REQUIRE(
      test::run_until(raw_io, [&] { return h.server().stats().connections_refused == kFlood - kPerPeer; }));
  CHECK(h.server().stats().connections == kPerPeer);
  // Clients from 127.0.0.1 are another peer: as many of them as the bound are served meanwhile.
  auto honest = h.make_channel();
  auto other = h.make_channel();
  CHECK_FALSE(test::call(*honest, test::test_service::echo, test::make_request("one")).ec);
  CHECK_FALSE(test::call(*other, test::test_service::echo, test::make_request("two")).ec);
  CHECK(h.server().stats().connections == 2 * kPerPeer);
  CHECK(h.server().stats().connections_refused == kFlood - kPerPeer);
  // The refused sockets of the hostile peer see the server's close.
  const auto closed_by_server = [&] { return count_closed_by_server(flood); };
  CHECK(test::run_until(
      raw_io, [&] { return closed_by_server() >= kFlood - kPerPeer; }, std::chrono::seconds(20)));
  CHECK(closed_by_server() == kFlood - kPerPeer);
}
