// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from real encoded
// frames, extras, immediates, handshakes and streams, so the fuzzers start from valid inputs.
// Usage: make_seeds DIR (scripts/fuzz.sh --seeds regenerates the committed ones).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "parsers.rdmarpc.pb.h"
#include "parsers_legacy.rdmarpc.pb.h"
#include "rpc/extras.hpp"
#include "rpc/frame.hpp"
#include "rpc_test.pb.h"
#include "streams.rdmarpc.pb.h"
#include "test_service.hpp"
#include "transport/rdma/wire.hpp"
#include "transport/tcp/tcp_framer.hpp"

using namespace rdmarpc;
namespace fs = std::filesystem;
namespace wire = rdmarpc::transport::rdma::wire;

namespace {

fs::path root;

void write(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = root / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename T>
std::string le(T v) {
  std::string out(sizeof(T), '\0');
  for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

std::string frame_bytes(frame::header h, const std::string& ex = {}, const std::string& payload = {}) {
  h.extras_length = static_cast<std::uint32_t>(ex.size());
  h.payload_length = static_cast<std::uint32_t>(payload.size());
  std::string head(frame::header_size(h), '\0');
  frame::encode_header(h, std::span<std::byte>(reinterpret_cast<std::byte*>(head.data()), head.size()));
  return head + ex + payload;
}

frame::header hdr(frame::kind k, std::uint32_t id, std::uint32_t method = 0, std::uint64_t timeout = 0,
                  std::uint8_t flags = 0, status_code status = status_code::ok) {
  frame::header h;
  h.kind = k;
  h.call_id = id;
  h.method_id = method;
  h.timeout_us = timeout;
  h.flags = flags;
  h.status = status;
  return h;
}

const metadata kMeta{{"authorization", "Bearer token"}, {"trace", "1"}};

std::string echo_request(const std::string& data, std::uint32_t reply_size = 0) {
  test::EchoRequest req;
  req.set_data(data);
  req.set_reply_size(reply_size);
  return req.SerializeAsString();
}

// A representative frame of every kind, keyed by a file name.
std::vector<std::pair<std::string, std::string>> frames() {
  using k = frame::kind;
  const stream_window_size window{4096, 4};
  test::StreamRequest ticks;
  ticks.set_count(3);
  ticks.set_size(8);
  return {
      {"request", frame_bytes(hdr(k::request, 1, test::test_service::echo.id), {}, echo_request("hello"))},
      {"request_meta_timeout",
       frame_bytes(hdr(k::request, 2, test::test_service::meta.id, 1000000, frame::kFlagHasTimeout),
                   extras::encode_request(kMeta), echo_request("x"))},
      {"response", frame_bytes(hdr(k::response, 1), {}, echo_request("reply"))},
      {"response_error", frame_bytes(hdr(k::response, 1, 0, 0, 0, status_code::not_found),
                                     extras::encode_response("no such key", kMeta, kMeta))},
      {"cancel", frame_bytes(hdr(k::cancel, 2))},
      {"stream_open", frame_bytes(hdr(k::stream_open, 3, test::test_service::ticks.id),
                                  extras::encode_request(kMeta, &window))},
      {"stream_message", frame_bytes(hdr(k::stream_message, 3), {}, ticks.SerializeAsString())},
      {"half_close", frame_bytes(hdr(k::half_close, 3))},
      {"trailers",
       frame_bytes(hdr(k::trailers, 3, 0, 0, 0, status_code::aborted), extras::encode_response("done"))},
      {"reset", frame_bytes(hdr(k::reset, 3, 0, 0, 0, status_code::cancelled))},
      {"window_update", frame_bytes(hdr(k::window_update, 3, 4, 4096))},
      {"stream_headers", frame_bytes(hdr(k::stream_headers, 3, 64, 1u << 20))},
      {"ping", frame_bytes(hdr(k::ping, 0, 0, 0x3d))},  // heartbeats: an opaque value in timeout_us
      {"pong", frame_bytes(hdr(k::pong, 0, 0, 0x3d))},
      // with the sender's heartbeat domain, as rdmarpc sends them
      {"ping_domain",
       frame_bytes(hdr(k::ping, 0, 0, 0x3e), {}, std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8))},
      {"pong_domain",
       frame_bytes(hdr(k::pong, 0, 0, 0x3e), {}, std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8))},
      {"going_away", frame_bytes(hdr(k::going_away, 0, 0, 0))},  // graceful shutdown, both ways
  };
}

std::string records(const std::vector<std::string>& messages) {
  std::string out;
  for (const auto& m : messages) out += le(static_cast<std::uint16_t>(m.size())) + m;
  return out;
}

void frame_seeds() {
  for (const auto& [name, bytes] : frames()) write("frame", name, bytes);
}

void extras_seeds() {
  const stream_window_size window{1u << 20, 64};
  write("extras", "request", std::string(1, '\0') + extras::encode_request(kMeta));
  write("extras", "stream_open", std::string(1, '\1') + extras::encode_request(kMeta, &window));
  write("extras", "response",
        std::string(1, '\2') + extras::encode_response("failed", kMeta, {{"count", "2"}}));
  write("extras", "request_small_limit", std::string(1, '\x04') + extras::encode_request(kMeta));
}

void rdma_wire_seeds() {
  const auto rec = [](wire::imm_fields f, const std::string& bytes) {
    return le(wire::encode_imm(f)) + le(static_cast<std::uint8_t>(bytes.size())) + bytes;
  };
  // Round trip of 1000 bytes in 64-byte slots; then fragments of 64 bytes (the u8 is size - 1).
  const std::string params =
      le(std::uint32_t{4096}) + le(std::uint16_t{1000}) + le(std::uint16_t{64}) + le(std::uint8_t{63});
  write("rdma_wire", "whole", params + rec({3, wire::fragment::whole}, "a whole message"));
  write("rdma_wire", "fragments",
        params + rec({0, wire::fragment::first}, std::string(64, 'f')) +
            rec({1, wire::fragment::middle}, std::string(64, 'm')) + rec({2, wire::fragment::last}, "end"));
  // A peer trying to keep a message open with an empty fragment: a protocol error.
  write(
      "rdma_wire", "empty_middle",
      params + rec({0, wire::fragment::first}, std::string(64, 'f')) + rec({0, wire::fragment::middle}, ""));
  write("rdma_wire", "credits_goodbye",
        params + rec({5, wire::fragment::whole, true}, "") + rec({0, wire::fragment::whole, true, true}, ""));
}

void handshake_seeds() {
  const wire::handshake h{wire::kProtocolVersion, 128, 8192, 16u << 20};
  const auto bytes = wire::encode_handshake(h);
  const std::string s(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  write("handshake", "typical", s);
  write("handshake", "padded", s + std::string(56 - s.size(), '\0'));
  const auto small =
      wire::encode_handshake({wire::kProtocolVersion, wire::kMinRingDepth, wire::kMinSlotSize, 64});
  write("handshake", "smallest", std::string(reinterpret_cast<const char*>(small.data()), small.size()));
  const auto reject = wire::encode_reject(wire::reject_reason::registered_memory_exhausted);
  write("handshake", "reject", std::string(reinterpret_cast<const char*>(reject.data()), reject.size()));
}

void tcp_framer_seeds() {
  // buffer 8 + 56, max 4096, chunk 17, read seed 1; then frames, a large one and the goodbye.
  const std::string params =
      le(std::uint8_t{56}) + le(std::uint16_t{4096}) + le(std::uint8_t{16}) + le(std::uint8_t{1});
  const auto tcp_frame = [](const std::string& body) {
    return le(static_cast<std::uint32_t>(body.size())) + body;
  };
  const std::string goodbye = le(transport::tcp::tcp_framer::kGoodbyeLength);
  write("tcp_framer", "frames",
        params + tcp_frame("hello") + tcp_frame("") + tcp_frame(std::string(200, 'L')) + goodbye);
  write("tcp_framer", "real_frames", params + tcp_frame(frames()[0].second) + tcp_frame(frames()[5].second));
  write("tcp_framer", "announce_large", params + le(std::uint32_t{4000}) + "only a few bytes");
}

void server_seeds() {
  using k = frame::kind;
  const stream_window_size window{4096, 4};
  test::StreamRequest ticks;
  ticks.set_count(5);
  ticks.set_size(16);
  streams::Item item;
  item.set_id(3);
  item.set_text("item");
  write("server", "unary",
        std::string(1, '\0') +
            records(
                {frame_bytes(hdr(k::request, 1, test::test_service::echo.id), {}, echo_request("hello")),
                 frame_bytes(hdr(k::request, 2, test::test_service::meta.id, 1000000, frame::kFlagHasTimeout),
                             extras::encode_request(kMeta), echo_request("x")),
                 frame_bytes(hdr(k::request, 3, test::test_service::fail.id), {}, echo_request("k")),
                 frame_bytes(hdr(k::request, 4, test::test_service::throws.id), {}, echo_request("")),
                 frame_bytes(hdr(k::request, 5, test::test_service::sleep.id), {}, echo_request("z")),
                 frame_bytes(hdr(k::cancel, 5)),
                 frame_bytes(hdr(k::request, 6, test::test_service::unknown.id), {}, echo_request(""))}));
  write("server", "server_stream",
        std::string(1, '\2') +
            records({frame_bytes(hdr(k::stream_open, 1, test::test_service::ticks.id),
                                 extras::encode_request({}, &window)),
                     frame_bytes(hdr(k::stream_message, 1), {}, ticks.SerializeAsString()),
                     frame_bytes(hdr(k::half_close, 1)), frame_bytes(hdr(k::window_update, 1, 4, 4096)),
                     frame_bytes(hdr(k::window_update, 1, 4, 4096))}));
  write("server", "client_stream",
        std::string(1, '\4') + records({frame_bytes(hdr(k::stream_open, 1, test::test_service::sum.id),
                                                    extras::encode_request(kMeta, &window)),
                                        frame_bytes(hdr(k::stream_message, 1), {}, echo_request("abc")),
                                        frame_bytes(hdr(k::stream_message, 1), {}, echo_request("defg")),
                                        frame_bytes(hdr(k::half_close, 1))}));
  write("server", "bidi_reset",
        std::string(1, '\1') + records({frame_bytes(hdr(k::stream_open, 7, test::test_service::chat.id)),
                                        frame_bytes(hdr(k::stream_message, 7), {}, echo_request("hi")),
                                        frame_bytes(hdr(k::reset, 7, 0, 0, 0, status_code::cancelled))}));
  write("server", "generated",
        std::string(1, '\0') +
            records({frame_bytes(hdr(k::request, 1, method_id("/streams.Events/Get")), {},
                                 item.SerializeAsString()),
                     frame_bytes(hdr(k::stream_open, 3, method_id("/streams.Events/Watch"))),
                     frame_bytes(hdr(k::stream_message, 3), {}, item.SerializeAsString()),
                     frame_bytes(hdr(k::half_close, 3)),
                     frame_bytes(hdr(k::stream_open, 5, method_id("/streams.Events/Upload"))),
                     frame_bytes(hdr(k::stream_message, 5), {}, item.SerializeAsString()),
                     frame_bytes(hdr(k::half_close, 5)),
                     frame_bytes(hdr(k::stream_open, 9, method_id("/streams.Events/Chat"))),
                     frame_bytes(hdr(k::stream_message, 9), {}, item.SerializeAsString())}));
}

}  // namespace

// message_parser: a type byte (0 Plain, 1 Empty, 2 Legacy), then a message of that type.
void message_parser_seeds() {
  parsers::Plain full;
  full.set_i32(-1);
  full.set_i64(1LL << 40);
  full.set_u32(7);
  full.set_u64(~0ULL);
  full.set_s32(-3);
  full.set_s64(-(1LL << 50));
  full.set_flag(true);
  full.set_mode(parsers::MODE_SAFE);
  full.set_f32(0xdeadbeef);
  full.set_sf32(-9);
  full.set_real32(-0.0f);
  full.set_f64(1);
  full.set_sf64(-1);
  full.set_real64(2.5);
  full.set_text("h\xc3\xa9llo");
  full.set_blob(std::string("\0\xff", 2));
  full.set_maybe(0);
  full.set_maybe_text("");
  full.set_class_(2047);
  full.set_far(1);
  write("message_parser", "plain_full", std::string(1, '\0') + full.SerializeAsString());
  parsers::Plain few;
  few.set_blob(std::string(64, 'x'));
  write("message_parser", "plain_blob", std::string(1, '\0') + few.SerializeAsString());
  write("message_parser", "empty", std::string(1, '\1'));
  parsers2::Legacy legacy;
  legacy.set_count(3);
  legacy.set_name("n");
  write("message_parser", "legacy", std::string(1, '\2') + legacy.SerializeAsString());
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  frame_seeds();
  extras_seeds();
  rdma_wire_seeds();
  handshake_seeds();
  tcp_framer_seeds();
  server_seeds();
  message_parser_seeds();
  return 0;
}
