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

// Reads the next at most `step` bytes of `bytes` from `at` into the framer; false when all were read.
bool read_more(tcp_framer& f, const std::string& bytes, std::size_t& at, std::size_t step) {
  if (at == bytes.size()) return false;
  const auto space = f.read_space();
  REQUIRE_FALSE(space.empty());
  const std::size_t n = std::min({step, space.size(), bytes.size() - at});
  std::memcpy(space.data(), bytes.data() + at, n);
  f.commit(n);
  at += n;
  return true;
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
    if (!read_more(f, bytes, at, step)) return out;
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

namespace {

// A message lent from the framer: where it lives and what it must still read.
struct held {
  std::uint32_t id;
  std::span<const std::byte> bytes;
  std::string want;
};

std::string text(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Feeds `bytes` in reads of `step`, lending every message while can_lend() allows (the rest are
// only read), and checks after every read that every lent message still reads as it arrived.
std::size_t feed_lending(tcp_framer& f, const std::string& bytes, std::size_t step, std::vector<held>& out) {
  std::size_t messages = 0;
  for (std::size_t at = 0;;) {
    for (auto e = f.next(); e != event::need_more; e = f.next()) {
      ++messages;
      if (e == event::large_message) {  // in its own memory, never lent
        f.take_large();
        continue;
      }
      REQUIRE(e == event::message);
      if (f.can_lend()) {
        const auto m = f.message();
        out.push_back({f.lend(), m, text(m)});
      }
      REQUIRE(f.lending_buffers() <= tcp_framer::kMaxLendingBuffers);
    }
    for (const auto& h : out) REQUIRE(text(h.bytes) == h.want);
    if (!read_more(f, bytes, at, step)) return messages;
  }
}

}  // namespace

TEST_CASE("tcp_framer: a lent message is never overwritten, up to the bound on lending buffers",
          "[tcp_framer]") {
  std::string stream;
  for (int i = 0; i < 200; ++i) stream += frame(std::string(5 + i % 11, static_cast<char>('a' + i % 26)));
  for (std::size_t step : {1u, 7u, 64u, 5000u}) {
    tcp_framer f(1024, 64);
    std::vector<held> lent;
    CHECK(feed_lending(f, stream, step, lent) == 200);
    // 200 frames of 9-19 bytes fill far more than eight 64-byte buffers: lending stopped there.
    CHECK(f.lending_buffers() == tcp_framer::kMaxLendingBuffers);
    CHECK(lent.size() < 200);
    CHECK(lent.size() >= tcp_framer::kMaxLendingBuffers * 3);
    for (const auto& h : lent) f.give_back(h.id);
    CHECK(f.lending_buffers() == 0);
    // Given back, the buffers serve again: the same stream lends as much as the first time.
    std::vector<held> again;
    CHECK(feed_lending(f, stream, step, again) == 200);
    CHECK(again.size() == lent.size());
    for (const auto& h : again) f.give_back(h.id);
    CHECK(f.idle());
  }
}

TEST_CASE("tcp_framer: messages given back at once lend from one buffer", "[tcp_framer]") {
  tcp_framer f(1024, 64);
  std::string stream;
  for (int i = 0; i < 50; ++i) stream += frame("message " + std::to_string(i));
  std::size_t at = 0;
  int seen = 0;
  while (at < stream.size()) {
    const auto space = f.read_space();
    const std::size_t n = std::min<std::size_t>({13, space.size(), stream.size() - at});
    std::memcpy(space.data(), stream.data() + at, n);
    f.commit(n);
    at += n;
    while (f.next() == event::message) {
      CHECK(text(f.message()) == "message " + std::to_string(seen++));
      REQUIRE(f.can_lend());
      const auto id = f.lend();
      CHECK(id == 0);  // released before the next read: the buffer is reused in place
      f.give_back(id);
    }
  }
  CHECK(seen == 50);
  CHECK(f.lending_buffers() == 0);
}

TEST_CASE("tcp_framer: discard keeps lent messages intact", "[tcp_framer]") {
  tcp_framer f(1024, 64);
  std::vector<held> lent;
  feed_lending(f, frame("kept") + frame("also kept") + frame("partial").substr(0, 6), 64, lent);
  REQUIRE(lent.size() == 2);
  f.discard();
  CHECK(f.idle());
  const auto space = f.read_space();
  std::memset(space.data(), 0x55, space.size());  // a read after discard (draining)
  f.commit(space.size());
  for (const auto& h : lent) CHECK(text(h.bytes) == h.want);
  for (const auto& h : lent) f.give_back(h.id);
  CHECK(f.lending_buffers() == 0);
}

TEST_CASE("tcp_framer: a large frame read into its own memory leaves lent messages intact", "[tcp_framer]") {
  tcp_framer f(1024, 64, 16);
  std::vector<held> lent;
  const std::string big(300, 'B');
  feed_lending(f, frame("first") + frame("second") + frame(big) + frame("after"), 64, lent);
  REQUIRE(lent.size() == 3);  // the large frame is never lent: it has its own memory
  CHECK(lent[2].want == "after");
  for (const auto& h : lent) f.give_back(h.id);
  CHECK(f.lending_buffers() == 0);
}

TEST_CASE("tcp_framer: a move to another buffer reuses the spare one before allocating", "[tcp_framer]") {
  tcp_framer f(1024, 64);
  // Frames of 20 bytes: three fit a 64-byte buffer, then the reading moves on to another buffer.
  std::string stream;
  for (int i = 0; i < 30; ++i) stream += frame(std::string(16, static_cast<char>('a' + i)));
  std::vector<held> lent;
  std::vector<std::uint32_t> ids;  // the buffers lent from, in order
  std::size_t at = 0;
  // Lends every message until the current buffer and two before it (A, B) are lent from.
  const auto lend_until = [&](std::size_t buffers) {
    while (ids.size() < buffers) {
      REQUIRE(read_more(f, stream, at, 1));
      while (f.next() == event::message) {
        const auto m = f.message();
        lent.push_back({f.lend(), m, text(m)});
        if (ids.empty() || ids.back() != lent.back().id) ids.push_back(lent.back().id);
      }
    }
  };
  lend_until(3);
  const auto give_back_all = [&](std::uint32_t id) {
    std::erase_if(lent, [&](const held& h) { return h.id == id && (f.give_back(id), true); });
  };
  give_back_all(ids[1]);  // B first: kept as the spare
  give_back_all(ids[0]);  // then A: its memory goes, one spare is enough
  const std::size_t before = f.read_buffer_bytes();
  CHECK(before == 2 * 64);
  lend_until(4);  // the reading moves on from the current buffer: into B, allocating nothing
  CHECK(ids[3] == ids[1]);
  CHECK(f.read_buffer_bytes() == before);
  for (const auto& h : lent) CHECK(text(h.bytes) == h.want);
}
