// Per-stream flow control and stream states without I/O (rpc/stream_window.hpp,
// rpc/stream_state.hpp): the writer never exceeds what the reader granted, the reader's memory is
// bounded, grants come back as the user consumes, and every frame a peer may not send is caught.
#include <catch2/catch.hpp>
#include <deque>

#include "rpc/stream_state.hpp"
#include "rpc/stream_window.hpp"

using rdmarpc::stream_receive_window;
using rdmarpc::stream_send_window;
using rdmarpc::stream_state;
using rdmarpc::stream_window_size;
using verdict = stream_state::verdict;

TEST_CASE("stream window: the writer stops when messages or bytes run out") {
  stream_send_window w({100, 3});
  CHECK(w.can_send());
  w.on_sent(10);
  w.on_sent(10);
  w.on_sent(10);
  CHECK_FALSE(w.can_send());  // no message credit left
  stream_send_window b({100, 10});
  b.on_sent(60);
  CHECK(b.can_send());
  b.on_sent(60);  // a message larger than what is left still goes
  CHECK(b.bytes() == -20);
  CHECK_FALSE(b.can_send());
}

TEST_CASE("stream window: a window announced as zero still lets one message through") {
  stream_send_window w({0, 0});
  CHECK(w.can_send());
  w.on_sent(500);
  CHECK_FALSE(w.can_send());
  CHECK(w.on_granted({500, 1}));
  CHECK(w.can_send());
  stream_send_window huge({~std::uint64_t{0}, 1});  // clamped, not negative
  CHECK(huge.bytes() > 0);
}

TEST_CASE("stream window: grants beyond the reader's window are refused") {
  stream_send_window w({100, 4});
  CHECK_FALSE(w.on_granted({1, 0}));  // nothing was spent
  CHECK_FALSE(w.on_granted({0, 1}));
  w.on_sent(40);
  CHECK(w.on_granted({40, 1}));
  CHECK(w.bytes() == 100);
  CHECK(w.messages() == 4);
  CHECK_FALSE(w.on_granted({1, 0}));
}

TEST_CASE("stream window: the reader refuses a message the writer had no credit for") {
  stream_receive_window r({100, 2});
  CHECK(r.on_received(10));
  CHECK(r.on_received(10));
  CHECK_FALSE(r.on_received(10));  // third message, two granted
  CHECK(r.held_messages() == 2);
  stream_receive_window bytes({50, 10});
  CHECK(bytes.on_received(80));       // starts with credit left: allowed past the window once
  CHECK_FALSE(bytes.on_received(1));  // no byte credit any more
  CHECK(bytes.held_bytes() == 80);
}

TEST_CASE("stream window: the reader grants once half the window was consumed") {
  stream_receive_window r({1000, 4});
  REQUIRE(r.on_received(10));
  REQUIRE(r.on_received(10));
  CHECK_FALSE(r.on_consumed(10).has_value());
  const auto grant = r.on_consumed(10);
  REQUIRE(grant.has_value());
  CHECK(*grant == stream_window_size{20, 2});
  CHECK(r.held_messages() == 0);
  CHECK(r.held_bytes() == 0);
}

TEST_CASE("stream window: writer and reader never deadlock and the reader's memory stays bounded") {
  // A writer with messages of varying sizes against a reader that consumes one message per step.
  const stream_window_size window{256, 8};
  stream_send_window writer(window);
  stream_receive_window reader(window);
  std::deque<std::uint64_t> wire;   // sent, not yet received
  std::deque<std::uint64_t> inbox;  // received, not yet consumed
  std::deque<stream_window_size> grants;
  std::uint64_t sent = 0, consumed = 0, max_held = 0;
  constexpr std::uint64_t kMessages = 2000;
  for (int step = 0; step < 100000 && consumed < kMessages; ++step) {
    while (sent < kMessages && writer.can_send()) {
      const std::uint64_t size = 1 + (sent * 37) % 200;
      writer.on_sent(size);
      wire.push_back(size);
      ++sent;
    }
    while (!wire.empty()) {
      REQUIRE(reader.on_received(wire.front()));
      inbox.push_back(wire.front());
      wire.pop_front();
    }
    max_held = std::max(max_held, reader.held_bytes());
    if (!inbox.empty()) {
      if (auto g = reader.on_consumed(inbox.front())) grants.push_back(*g);
      inbox.pop_front();
      ++consumed;
    }
    while (!grants.empty()) {
      REQUIRE(writer.on_granted(grants.front()));
      grants.pop_front();
    }
  }
  CHECK(consumed == kMessages);
  CHECK(max_held < window.bytes + 200);  // the window plus one message
}

TEST_CASE("stream state: client writes - half-closes - and the server's trailers end the stream") {
  stream_state client(stream_state::side::client);
  stream_state server(stream_state::side::server);
  CHECK(client.write_message());
  CHECK(server.on_peer_message() == verdict::accept);
  REQUIRE(client.write_half_close());
  CHECK_FALSE(client.can_write());
  CHECK_FALSE(client.write_half_close());
  CHECK(server.on_peer_half_close() == verdict::accept);
  CHECK(server.on_peer_message() == verdict::violation);     // a message after the half-close
  CHECK(server.on_peer_half_close() == verdict::violation);  // twice
  CHECK(server.write_message());                             // the server still writes
  CHECK(client.on_peer_message() == verdict::accept);
  REQUIRE(server.write_trailers());
  CHECK(server.is_closed());
  CHECK(client.on_peer_trailers() == verdict::ends);
  CHECK(client.is_closed());
  CHECK(client.on_peer_message() == verdict::ignore);  // crossed the trailers: dropped
}

TEST_CASE("stream state: frames only the other role may send are violations") {
  stream_state client(stream_state::side::client);
  stream_state server(stream_state::side::server);
  CHECK(client.on_peer_half_close() == verdict::violation);  // servers do not half-close
  CHECK(server.on_peer_trailers() == verdict::violation);    // clients send no trailers
  CHECK_FALSE(server.write_half_close());
  CHECK_FALSE(client.write_trailers());
}

TEST_CASE("stream state: a reset ends the stream from either side - once") {
  stream_state server(stream_state::side::server);
  CHECK(server.on_peer_reset() == verdict::ends);
  CHECK(server.is_closed());
  CHECK(server.on_peer_reset() == verdict::ignore);
  CHECK(server.on_peer_message() == verdict::ignore);
  CHECK(server.on_peer_half_close() == verdict::ignore);
  CHECK_FALSE(server.write_reset());
  stream_state client(stream_state::side::client);
  CHECK(client.write_reset());
  CHECK_FALSE(client.write_message());
}
