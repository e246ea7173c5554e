// libFuzzer target: the rdma transport's receive path without a device (transport/rdma/wire.hpp):
// decode_imm on each immediate, then the reassembler fed the fragments in arrival order, as
// rdma_connection does; a simple model of the fragment rules says what every feed must answer.
// Also splits a message with fragment_count/fragment_kind and checks it reassembles unchanged.
//
// Input: u32 max_message_size (mod 64 KiB), u16 message size and u16 slot size for the
// round trip, u8 fragment size - 1, then records of (u32 immediate, u8 length, length bytes) until
// the input ends.
#include <vector>

#include "fuzz_input.hpp"
#include "transport/rdma/wire.hpp"

namespace wire = rdmarpc::transport::rdma::wire;
using outcome = wire::reassembler::outcome;
using rdmarpc::fuzz::input;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmarpc::fuzz::quiet_logging();
  return 0;
}

namespace {

void round_trip(std::size_t message_size, std::size_t slot_size) {
  std::vector<std::byte> message(message_size);
  for (std::size_t i = 0; i < message_size; ++i) message[i] = static_cast<std::byte>(i * 13 + 5);
  const std::size_t count = wire::fragment_count(message_size, slot_size);
  RDMARPC_FUZZ_CHECK(count >= 1 && (count - 1) * slot_size < std::max<std::size_t>(message_size, 1));
  wire::reassembler r(message_size, slot_size);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t at = i * slot_size;
    const auto bytes =
        std::span<const std::byte>(message).subspan(at, std::min(slot_size, message_size - at));
    const auto kind = wire::fragment_kind(i, count);
    const auto imm = wire::decode_imm(wire::encode_imm({7, kind, false, false}));
    RDMARPC_FUZZ_CHECK(imm.has_value() && imm->kind == kind);
    const outcome o = r.feed(kind, bytes);
    if (count == 1) {
      RDMARPC_FUZZ_CHECK(o == outcome::whole);
    } else if (i + 1 < count) {
      RDMARPC_FUZZ_CHECK(o == outcome::need_more);
    } else {
      RDMARPC_FUZZ_CHECK(o == outcome::complete);
      RDMARPC_FUZZ_CHECK(r.take() == message);
    }
  }
  RDMARPC_FUZZ_CHECK(!r.in_progress());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  const std::size_t max_message_size = in.take<std::uint32_t>() % (64 * 1024);
  const std::size_t message_size = in.take<std::uint16_t>();
  const std::size_t slot_size = wire::kMinSlotSize + in.take<std::uint16_t>() % 4096;
  round_trip(message_size % 16384, slot_size);

  // Fragments below are at most 255 bytes: a fragment size they can match.
  const std::size_t fragment_size = 1 + in.take<std::uint8_t>();
  wire::reassembler r(max_message_size, fragment_size);
  std::vector<std::byte> model;  // what the message being reassembled holds so far
  bool in_progress = false;
  while (!in.empty()) {
    const auto value = in.take<std::uint32_t>();
    const auto bytes = in.take_bytes(in.take<std::uint8_t>());
    const auto imm = wire::decode_imm(value);
    if (!imm) return 0;  // protocol error: the connection is closed
    RDMARPC_FUZZ_CHECK(wire::encode_imm(*imm) == value);
    if (imm->credit_only) continue;  // only credits; never reaches the reassembler

    outcome expected = outcome::protocol_error;
    switch (imm->kind) {
      case wire::fragment::whole:
        if (!in_progress && bytes.size() <= max_message_size) expected = outcome::whole;
        break;
      case wire::fragment::first:
        if (!in_progress && bytes.size() <= max_message_size && bytes.size() == fragment_size)
          expected = outcome::need_more;
        break;
      case wire::fragment::middle:
      case wire::fragment::last:
        if (in_progress && model.size() + bytes.size() <= max_message_size &&
            (imm->kind == wire::fragment::middle ? bytes.size() == fragment_size
                                                 : !bytes.empty() && bytes.size() <= fragment_size)) {
          expected = imm->kind == wire::fragment::middle ? outcome::need_more : outcome::complete;
        }
        break;
    }
    const outcome got = r.feed(imm->kind, bytes);
    RDMARPC_FUZZ_CHECK(got == expected);
    switch (got) {
      case outcome::whole: break;
      case outcome::need_more:
        if (imm->kind == wire::fragment::first) model.clear();
        model.insert(model.end(), bytes.begin(), bytes.end());
        in_progress = true;
        break;
      case outcome::complete: {
        model.insert(model.end(), bytes.begin(), bytes.end());
        const auto message = r.take();
        RDMARPC_FUZZ_CHECK(message == model && message.size() <= max_message_size);
        model.clear();
        in_progress = false;
        break;
      }
      case outcome::protocol_error: RDMARPC_FUZZ_CHECK(!r.in_progress()); return 0;
    }
    RDMARPC_FUZZ_CHECK(r.in_progress() == in_progress);
  }
  return 0;
}
