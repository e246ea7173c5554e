// libFuzzer target: the generated parsers (rdmarpc::message_parser, docs/generated-api.md) against
// protobuf's own ParsePartialFromArray. For any bytes both must agree on whether they parse and,
// when they do, on the message (known and unknown fields, compared as protobuf's serialization),
// starting from a message that holds fields and an unknown field already, as a reused one does.
//
// Input: one byte picking the type (parsers.Plain, every field kind; parsers.Empty; the proto2
// parsers2.Legacy), then the message bytes.
#include <google/protobuf/stubs/logging.h>

#include <string>

#include "fuzz_input.hpp"
#include "parsers.rdmarpc.pb.h"
#include "parsers_legacy.rdmarpc.pb.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  rdmarpc::fuzz::quiet_logging();
  return 0;
}

namespace {

template <typename Message>
void compare(rdmarpc::message_parser parser, std::span<const std::byte> bytes) {
  const std::string unknown("\xa0\x06\x01", 3);  // field 100: unknown to every type here
  Message ours;
  Message theirs;
  RDMARPC_FUZZ_CHECK(ours.ParseFromString(unknown) && theirs.ParseFromString(unknown));
  const bool ours_ok = parser(ours, bytes);
  const bool theirs_ok = theirs.ParsePartialFromArray(bytes.data(), static_cast<int>(bytes.size()));
  RDMARPC_FUZZ_CHECK(ours_ok == theirs_ok);
  if (ours_ok) RDMARPC_FUZZ_CHECK(ours.SerializeAsString() == theirs.SerializeAsString());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const google::protobuf::LogSilencer quiet;  // protobuf logs each string that is not UTF-8
  rdmarpc::fuzz::input in(data, size);
  const auto pick = in.take<std::uint8_t>();
  const auto bytes = in.rest();
  switch (pick % 3) {
    case 0: compare<parsers::Plain>(parsers::Parsers::echo_method.request_parser, bytes); break;
    case 1: compare<parsers::Empty>(parsers::Parsers::ping_method.request_parser, bytes); break;
    case 2: compare<parsers2::Legacy>(parsers2::LegacyParsers::get_method.request_parser, bytes); break;
  }
  return 0;
}
