// Unit tests of tcp's receive framing (transport/tcp/tcp_framer.hpp): frames split anywhere,
// several in one read, the goodbye, the limits, and large frames whose memory follows the bytes
// that arrived. Pure: no socket.
#include "transport/tcp/tcp_framer.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

using rdmarpc::transport::tcp::tcp_framer;
using event = tcp_framer::event;

namespace {

std::string header(std::uint32_t n) {
  std::string h(4, '\0');
  for (std::size_t i = 0; i < 4; ++i) h[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return h;
}

std::string frame(const std::string& body) {
  return header(static_cast<std::uint32_t>(body.size())) + body;
}

// Feeds `bytes` in reads of at most `step` bytes; collects messages (and the other events as
// "<goodbye>", "<after_goodbye>", "<too_large>"), stopping at a protocol error.
std::vector<std::string> feed(tcp_framer& f, const std::string& bytes, std::size_t step) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (true) {
    for (bool more = true; more;) {
      switch (f.next()) {
        case event::need_more: more = false; break;
        case event::message: {
          const auto m = f.message();
          out.emplace_back(reinterpret_cast<const char*>(m.data()), m.size());
          break;
        }
        case event::large_message: {
          const auto m = f.take_large();
          out.emplace_back(reinterpret_cast<const char*>(m.data()), m.size());
          break;
        }
        case event::goodbye: out.emplace_back("<goodbye>"); break;
        case event::after_goodbye: out.emplace_back("<after_goodbye>"); return out;
        case event::too_large: out.emplace_back("<too_large>"); return out;
      }
    }
    if (at == bytes.size()) return out;
    const auto space = f.read_space();
    REQUIRE_FALSE(space.empty());
    const std::size_t n = std::min({step, space.size(), bytes.size() - at});
    std::memcpy(space.data(), bytes.data() + at, n);
    f.commit(n);
    at += n;
  }
}

}  // namespace

TEST_CASE("tcp_framer: frames arrive whole whatever the read sizes", "[tcp_framer]") {
  const std::string big(300, 'b');  // larger than the 64-byte buffer below: read into its own memory
  const std::string stream = frame("hello") + frame("") + frame(big) + frame("x");
  for (std::size_t step : {1u, 3u, 7u, 64u, 1000u}) {
    tcp_framer f(1024, 64, 16);
    CHECK(feed(f, stream, step) == std::vector<std::string>{"hello", "", big, "x"});
    CHECK(f.idle());
  }
}

TEST_CASE("tcp_framer: the goodbye and data after it", "[tcp_framer]") {
  tcp_framer f(1024, 64);
  const std::string goodbye = header(tcp_framer::kGoodbyeLength);
  CHECK(feed(f, frame("a") + goodbye, 2) == std::vector<std::string>{"a", "<goodbye>"});
  CHECK(f.said_goodbye());
  CHECK(f.idle());
  tcp_framer g(1024, 64);
  CHECK(feed(g, goodbye + frame("late"), 5) == std::vector<std::string>{"<goodbye>", "<after_goodbye>"});
}

TEST_CASE("tcp_framer: a frame above the maximum is refused from its header alone", "[tcp_framer]") {
  tcp_framer f(100, 64);
  CHECK(feed(f, frame("ok") + header(101), 64) == std::vector<std::string>{"ok", "<too_large>"});
  CHECK(f.announced() == 101);
}

TEST_CASE("tcp_framer: memory for a large frame follows the bytes that arrived", "[tcp_framer]") {
  // The default sizes: a header announcing 16 MiB followed by 10 bytes.
  constexpr std::uint32_t announced = 16u << 20;
  tcp_framer f(announced);
  const std::string bytes = header(announced) + std::string(10, 'z');
  CHECK(feed(f, bytes, bytes.size()).empty());
  CHECK_FALSE(f.idle());
  // At most one chunk is made ready for the next read, never the announced size.
  const auto space = f.read_space();
  CHECK(space.size() == tcp_framer::kDefaultBodyChunk);
  f.commit(0);
  CHECK(f.body_capacity() <= 2 * tcp_framer::kDefaultBodyChunk);
  f.discard();
  CHECK(f.idle());
  CHECK(f.body_capacity() == 0);
}

TEST_CASE("tcp_framer: a partial header or body is not idle", "[tcp_framer]") {
  tcp_framer f(1024, 64);
  CHECK(feed(f, std::string("\x05\x00", 2), 64).empty());
  CHECK_FALSE(f.idle());
  tcp_framer g(1024, 64);
  CHECK(feed(g, frame("hello").substr(0, 6), 64).empty());
  CHECK_FALSE(g.idle());
}
