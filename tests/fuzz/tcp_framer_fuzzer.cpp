// libFuzzer target: tcp's receive framing (transport/tcp/tcp_framer.hpp) fed a byte stream in
// reads of varying size, as tcp_connection does. The events must match a straightforward parse of
// the whole stream (messages, goodbye, data after it, a frame above the maximum), and the memory
// held for a large frame must follow the bytes that arrived, never the length a header announced.
// Messages are lent (as tcp_connection does) and given back at random moments: a lent message must
// read the same until it comes back, and lending never keeps more than kMaxLendingBuffers buffers.
//
// Input: u8 read buffer size, u16 max_message_size, u8 body chunk, u8 seed of the read sizes, then
// the stream itself (so a seed is a real tcp stream behind 5 bytes).
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "transport/tcp/tcp_framer.hpp"

using rdmarpc::fuzz::input;
using rdmarpc::transport::tcp::tcp_framer;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmarpc::fuzz::quiet_logging();
  return 0;
}

namespace {

// One event the framer reports: its kind and, for a message (whole or large), its bytes.
struct item {
  tcp_framer::event kind;
  std::string bytes;
  bool operator==(const item&) const = default;
};

std::uint32_t length_at(std::span<const std::byte> s, std::size_t at) {
  std::uint32_t n = 0;
  for (std::size_t i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(s[at + i]) << (8 * i);
  return n;
}

// The reference: the whole stream at once. `consumed`: bytes fully parsed.
std::vector<item> reference(std::span<const std::byte> s, std::size_t max, std::size_t& consumed) {
  std::vector<item> out;
  std::size_t at = 0;
  bool goodbye = false;
  while (s.size() - at >= 4) {
    const std::uint32_t n = length_at(s, at);
    if (goodbye) {
      out.push_back({tcp_framer::event::after_goodbye, {}});
      break;
    }
    if (n == tcp_framer::kGoodbyeLength) {
      goodbye = true;
      at += 4;
      out.push_back({tcp_framer::event::goodbye, {}});
      continue;
    }
    if (n > max) {
      out.push_back({tcp_framer::event::too_large, {}});
      break;
    }
    if (s.size() - at - 4 < n) break;
    out.push_back(
        {tcp_framer::event::message, std::string(reinterpret_cast<const char*>(s.data() + at + 4), n)});
    at += 4 + n;
  }
  consumed = at;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  const std::size_t buffer_size = 8 + in.take<std::uint8_t>();
  const std::size_t max = in.take<std::uint16_t>();
  const std::size_t chunk = 1 + in.take<std::uint8_t>();
  std::uint32_t rng = 0x9e3779b9u ^ in.take<std::uint8_t>();
  const auto stream = in.rest();

  std::size_t consumed = 0;
  const std::vector<item> want = reference(stream, max, consumed);

  tcp_framer f(max, buffer_size, chunk);
  struct lent_message {
    std::uint32_t id;
    std::span<const std::byte> bytes;
    std::string want;
  };
  std::vector<lent_message> lent;
  const auto text = [](std::span<const std::byte> b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  };
  std::vector<item> got;
  std::size_t fed = 0;
  bool stopped = false;
  while (!stopped) {
    for (bool more = true; more && !stopped;) {
      switch (const auto e = f.next()) {
        case tcp_framer::event::need_more: more = false; break;
        case tcp_framer::event::message: {
          const auto m = f.message();
          got.push_back({tcp_framer::event::message, text(m)});
          rng = rng * 1664525u + 1013904223u;
          if ((rng >> 28) < 12 && f.can_lend()) lent.push_back({f.lend(), m, text(m)});
          RDMARPC_FUZZ_CHECK(f.lending_buffers() <= tcp_framer::kMaxLendingBuffers);
          break;
        }
        case tcp_framer::event::large_message: {
          const auto m = f.take_large();
          RDMARPC_FUZZ_CHECK(m.size() > buffer_size - tcp_framer::kHeaderSize);
          got.push_back(
              {tcp_framer::event::message, std::string(reinterpret_cast<const char*>(m.data()), m.size())});
          break;
        }
        case tcp_framer::event::goodbye: got.push_back({e, {}}); break;
        case tcp_framer::event::after_goodbye:
        case tcp_framer::event::too_large:
          got.push_back({e, {}});
          stopped = true;
          break;
      }
    }
    for (const auto& m : lent) RDMARPC_FUZZ_CHECK(text(m.bytes) == m.want);
    rng = rng * 1664525u + 1013904223u;
    if (!lent.empty() && (rng >> 28) < 6) {  // give some back, from anywhere in the list
      const std::size_t from = (rng >> 8) % lent.size();
      const std::size_t n = 1 + (rng >> 16) % (lent.size() - from);
      for (std::size_t i = from; i < from + n; ++i) f.give_back(lent[i].id);
      lent.erase(lent.begin() + static_cast<std::ptrdiff_t>(from),
                 lent.begin() + static_cast<std::ptrdiff_t>(from + n));
    }
    if (stopped || fed == stream.size()) break;
    const auto space = f.read_space();
    RDMARPC_FUZZ_CHECK(!space.empty());
    rng = rng * 1664525u + 1013904223u;
    const std::size_t n = std::min({space.size(), stream.size() - fed, std::size_t{1} + (rng >> 24) % 64});
    std::memcpy(space.data(), stream.data() + fed, n);
    f.commit(n);
    fed += n;
    // Memory follows what arrived: a buffer, what was fed and one chunk (vector growth doubles).
    RDMARPC_FUZZ_CHECK(f.body_capacity() <= 2 * (fed + chunk));
  }
  RDMARPC_FUZZ_CHECK(got == want);
  if (!stopped) RDMARPC_FUZZ_CHECK(f.idle() == (consumed == stream.size()));
  f.discard();
  RDMARPC_FUZZ_CHECK(f.idle() && f.body_capacity() == 0);
  for (const auto& m : lent) RDMARPC_FUZZ_CHECK(text(m.bytes) == m.want);
  for (const auto& m : lent) f.give_back(m.id);
  RDMARPC_FUZZ_CHECK(f.lending_buffers() == 0);
  return 0;
}
