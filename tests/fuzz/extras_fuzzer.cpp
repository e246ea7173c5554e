// libFuzzer target: the frame extras (rpc/extras.hpp) as a receiver meets them: the limit checks
// first (size, then count_fields, which allocates nothing), then decode_request / decode_response.
// Checks that count_fields bounds what decoding yields (the limits really bound the allocation)
// and that whatever decodes re-encodes to extras that decode to the same values.
//
// Input: one byte picking the decoder and the entry limit, then the extras bytes.
#include "fuzz_input.hpp"
#include "rpc/extras.hpp"

using namespace rdmarpc;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logging();
  return 0;
}

namespace {

constexpr std::size_t kMaxBytes = 8 * 1024;  // server_options' default max_metadata_bytes

void request(std::span<const std::byte> bytes, std::size_t max_entries, bool stream) {
  if (bytes.size() > kMaxBytes) return;  // refused before anything is looked at
  const auto fields = extras::count_fields(bytes);
  if (!fields || *fields > max_entries + (stream ? 1 : 0)) return;  // malformed, or refused
  metadata md;
  stream_window_size window{1, 2};
  if (!extras::decode_request(bytes, md, stream ? &window : nullptr)) return;
  RDMARPC_FUZZ_CHECK(md.size() <= *fields);
  std::size_t text = 0;
  for (const auto& [k, v] : md) text += k.size() + v.size();
  RDMARPC_FUZZ_CHECK(text <= bytes.size());

  const std::string again = extras::encode_request(md, stream ? &window : nullptr);
  metadata md2;
  stream_window_size window2{3, 4};
  RDMARPC_FUZZ_CHECK(
      extras::decode_request(std::span(reinterpret_cast<const std::byte*>(again.data()), again.size()), md2,
                             stream ? &window2 : nullptr));
  RDMARPC_FUZZ_CHECK(md2 == md);
  if (stream) RDMARPC_FUZZ_CHECK(window2.bytes == window.bytes && window2.messages == window.messages);
}

void response(std::span<const std::byte> bytes, std::size_t max_entries) {
  const auto fields = extras::count_fields(bytes);
  if (!fields) return;                                                // malformed: the connection is closed
  if (bytes.size() > kMaxBytes || *fields > max_entries + 1) return;  // the call fails instead
  std::string status_message;
  metadata initial, trailing;
  if (!extras::decode_response(bytes, status_message, &initial, &trailing)) return;
  RDMARPC_FUZZ_CHECK(initial.size() + trailing.size() <= *fields);
  RDMARPC_FUZZ_CHECK(status_message.size() <= bytes.size());

  const std::string again = extras::encode_response(status_message, initial, trailing);
  std::string status2;
  metadata initial2, trailing2;
  RDMARPC_FUZZ_CHECK(
      extras::decode_response(std::span(reinterpret_cast<const std::byte*>(again.data()), again.size()),
                              status2, &initial2, &trailing2));
  RDMARPC_FUZZ_CHECK(initial2 == initial && trailing2 == trailing);
  RDMARPC_FUZZ_CHECK(status2 == status_message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::input in(data, size);
  const auto mode = in.take<std::uint8_t>();
  const std::size_t max_entries = (mode >> 2) == 0 ? 64 : (mode >> 2);  // 64: the default
  const auto bytes = in.rest();
  switch (mode & 3) {
    case 0: request(bytes, max_entries, false); break;
    case 1: request(bytes, max_entries, true); break;
    default: response(bytes, max_entries); break;
  }
  return 0;
}
