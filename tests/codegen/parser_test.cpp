// Generated parsers (rdmarpc::message_parser) against protobuf's own parse: which types get one,
// and for every input, valid or not, the same verdict and the same message as ParsePartialFromArray.

#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/stubs/logging.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "parsers.rdmarpc.pb.h"
#include "parsers_legacy.rdmarpc.pb.h"
#include "rpc/message_parser.hpp"

namespace {

std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// A message left in the state a reused call object may be in: fields set, and an unknown field.
template <typename Message>
void dirty(Message& m) {
  const std::string unknown("\xa0\x06\x01", 3);  // field 100, varint 1: unknown to every type here
  REQUIRE(m.ParseFromString(unknown));
  if constexpr (std::is_same_v<Message, parsers::Plain>) {
    m.set_i32(-5);
    m.set_text("stale");
    m.set_maybe(3);
  }
}

// Parses `bytes` with `parser` and with protobuf, each into a dirty message: the same verdict, and
// when both parse, the same message (its known and unknown fields, compared as protobuf's bytes).
template <typename Message>
void check_same(rdmarpc::message_parser parser, const std::string& bytes) {
  const google::protobuf::LogSilencer quiet;  // (protobuf logs each string that is not UTF-8)
  Message ours;
  Message theirs;
  dirty(ours);
  dirty(theirs);
  const bool ours_ok = parser(ours, as_bytes(bytes));
  const bool theirs_ok = theirs.ParsePartialFromArray(bytes.data(), static_cast<int>(bytes.size()));
  INFO("input of " << bytes.size() << " bytes");
  REQUIRE(ours_ok == theirs_ok);
  if (ours_ok) REQUIRE(ours.SerializeAsString() == theirs.SerializeAsString());
}

std::string varint(std::uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

parsers::Plain random_plain(std::mt19937_64& rng) {
  parsers::Plain m;
  const auto pick = [&rng](int in) { return rng() % in == 0; };
  const auto any = [&rng] { return rng(); };
  if (!pick(3)) m.set_i32(static_cast<std::int32_t>(any()));
  if (!pick(3)) m.set_i64(static_cast<std::int64_t>(any()));
  if (!pick(3)) m.set_u32(static_cast<std::uint32_t>(any()));
  if (!pick(3)) m.set_u64(any() >> (any() % 64));
  if (!pick(3)) m.set_s32(static_cast<std::int32_t>(any()));
  if (!pick(3)) m.set_s64(static_cast<std::int64_t>(any()));
  if (!pick(3)) m.set_flag(true);
  if (!pick(3))
    m.set_mode(static_cast<parsers::Mode>(static_cast<std::int32_t>(any() % 5) - 1));  // open: -1, 3
  if (!pick(3)) m.set_f32(static_cast<std::uint32_t>(any()));
  if (!pick(3)) m.set_sf32(static_cast<std::int32_t>(any()));
  if (!pick(3)) m.set_real32(pick(4) ? -0.0f : static_cast<float>(static_cast<std::int64_t>(any())) / 7.0f);
  if (!pick(3)) m.set_f64(any());
  if (!pick(3)) m.set_sf64(static_cast<std::int64_t>(any()));
  if (!pick(3)) m.set_real64(pick(4) ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(any()));
  if (!pick(3))
    m.set_text(pick(2) ? std::string("h\xc3\xa9llo \xf0\x9f\x98\x80") : std::string(any() % 200, 'a'));
  if (!pick(3)) m.set_blob(std::string(any() % 300, static_cast<char>(any())));
  if (!pick(2)) m.set_maybe(pick(2) ? 0 : static_cast<std::int32_t>(any()));
  if (!pick(2)) m.set_maybe_text(pick(2) ? "" : "optional");
  if (!pick(3)) m.set_class_(static_cast<std::int32_t>(any()));
  if (!pick(3)) m.set_far(any());
  return m;
}

}  // namespace

TEST_CASE("the generator writes parsers for unary messages of plain fields only") {
  using parsers::Parsers;
  CHECK(Parsers::echo_method.request_parser != nullptr);
  CHECK(Parsers::echo_method.reply_parser == Parsers::echo_method.request_parser);  // one per type
  CHECK(Parsers::ping_method.request_parser != nullptr);                            // no fields at all
  // A message field, a repeated field, a oneof, a map: protobuf parses them.
  CHECK(Parsers::nest_method.request_parser == nullptr);
  CHECK(Parsers::nest_method.reply_parser == nullptr);
  CHECK(Parsers::choose_method.request_parser == nullptr);
  CHECK(Parsers::choose_method.reply_parser == nullptr);
  // Streams parse their messages with protobuf.
  CHECK(Parsers::watch_method.request_parser == nullptr);
  CHECK(Parsers::watch_method.reply_parser == nullptr);
  // proto2: defaults are fine; a closed enum keeps unknown values as unknown fields (protobuf's job).
  CHECK(parsers2::LegacyParsers::get_method.request_parser != nullptr);
  CHECK(parsers2::LegacyParsers::get_method.reply_parser == nullptr);
}

TEST_CASE("a generated parser reads what protobuf writes, field by field") {
  const auto parse = parsers::Parsers::echo_method.request_parser;
  std::mt19937_64 rng(20261208);
  for (int i = 0; i < 2000; ++i) {
    const parsers::Plain m = random_plain(rng);
    const std::string bytes = m.SerializeAsString();
    parsers::Plain parsed;
    dirty(parsed);
    REQUIRE(parse(parsed, as_bytes(bytes)));
    REQUIRE(parsed.SerializeAsString() == bytes);
    REQUIRE(parsed.has_maybe() == m.has_maybe());
    REQUIRE(parsed.has_maybe_text() == m.has_maybe_text());
  }
  parsers::Plain empty;
  dirty(empty);
  REQUIRE(parse(empty, {}));
  CHECK(empty.ByteSizeLong() == 0);  // cleared: fields and the unknown one
}

TEST_CASE("a generated parser decides every input as protobuf does") {
  const auto parse = parsers::Parsers::echo_method.request_parser;
  const auto tag = [](std::uint32_t field, int wire_type) {
    return varint(std::uint64_t{field} << 3 | wire_type);
  };

  SECTION("edge cases") {
    const std::vector<std::string> inputs = {
        tag(1, 0) + varint(~std::uint64_t{0}),                          // int32 -1: a 10-byte varint
        tag(1, 0) + std::string(10, '\xff') + '\x01',                   // an 11-byte varint
        tag(1, 0) + std::string(9, '\xff') + '\x7f',                    // a 10th byte past 64 bits
        tag(1, 0) + varint(1) + tag(1, 0) + varint(2),                  // twice: the last one wins
        tag(15, 2) + varint(3) + "abc" + tag(15, 2) + varint(1) + "d",  // a string twice
        tag(1, 2) + varint(1) + "x",                                    // int32 sent as bytes
        tag(16, 0) + varint(5),                                         // bytes sent as a varint
        tag(100, 0) + varint(7),                                        // an unknown field
        tag(100, 2) + varint(2) + "zz" + tag(1, 0) + varint(3),         // unknown, then known
        std::string(1, '\0'),                                           // tag 0
        tag(1, 4),                                                      // an end-group tag
        tag(1, 3) + tag(1, 4),                                          // a group
        tag(1, 0),                                                      // a tag with no value
        tag(15, 2) + varint(5) + "ab",                                  // a string cut short
        tag(9, 5) + "abc",                                              // fixed32 cut short
        tag(12, 1) + "abcdefg",                                         // fixed64 cut short
        tag(15, 2) + varint(2) + "\xc3\x28",                            // proto3 string, not UTF-8
        tag(15, 2) + varint(2) + "\xc0\x80",                            // an overlong form
        tag(15, 2) + varint(3) + "\xed\xa0\x80",                        // a surrogate
        tag(15, 2) + varint(4) + "\xf4\x90\x80\x80",                    // past U+10FFFF
        tag(15, 2) + varint(4) + "\xf0\x9f\x98\x80",                    // U+1F600: fine
        tag(16, 2) + varint(2) + "\xc3\x28",                            // bytes need not be UTF-8
        "\x88\x80\x80\x80\x80\x00" + varint(1),                         // field 1's tag in 6 bytes
        "\x88\x80\x80\x80\x10" + varint(1),                             // a 5-byte tag past 32 bits
        "\x88\x80\x00" + varint(1),                                     // an overlong 3-byte tag
        tag(16, 2) + "\x83\x80\x80\x80\x00" + "abc",                    // a 5-byte length
        tag(16, 2) + "\x83\x80\x80\x80\x80\x00" + "abc",                // a 6-byte length
        tag(16, 2) + "\xff\xff\xff\xff\x07",                            // a length near 2 GiB
        tag(8, 0) + varint(1000),                                       // an enum value it lacks
        tag(536870911, 0) + varint(1),                                  // the highest field number
        tag(2047, 0) + varint(1),                                       // Class (class_)
        tag(17, 0) + varint(0),                                         // optional, present as 0
        tag(18, 2) + varint(0),                                         // optional string, empty
    };
    for (const std::string& in : inputs) check_same<parsers::Plain>(parse, in);
  }

  SECTION("mutated messages") {
    std::mt19937_64 rng(7);
    for (int i = 0; i < 3000; ++i) {
      std::string bytes = random_plain(rng).SerializeAsString();
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !bytes.empty(); ++e) {
        const std::size_t at = rng() % bytes.size();
        switch (rng() % 4) {
          case 0: bytes[at] = static_cast<char>(rng()); break;  // a byte changed
          case 1: bytes.resize(at); break;                      // cut short
          case 2: bytes.insert(at, 1, static_cast<char>(rng())); break;
          case 3: bytes.erase(at, 1); break;
        }
      }
      check_same<parsers::Plain>(parse, bytes);
    }
  }

  SECTION("a message with no fields") {
    const auto parse_empty = parsers::Parsers::ping_method.request_parser;
    for (const std::string& in : {std::string(), tag(1, 0) + varint(1), std::string(1, '\0'), tag(3, 2)})
      check_same<parsers::Empty>(parse_empty, in);
  }

  SECTION("proto2: defaults come back when a field is absent; strings are not checked") {
    const auto parse_legacy = parsers2::LegacyParsers::get_method.request_parser;
    for (const std::string& in : {std::string(), tag(1, 0) + varint(3), tag(2, 2) + varint(2) + "\xc3\x28",
                                  tag(3, 2) + varint(1) + "r" + tag(2, 2) + varint(1) + "n"}) {
      check_same<parsers2::Legacy>(parse_legacy, in);
    }
    parsers2::Legacy m;
    m.set_count(1);
    REQUIRE(parse_legacy(m, {}));
    CHECK(m.count() == 7);
    CHECK(!m.has_count());
    CHECK(m.name() == "x");
  }
}

TEST_CASE("a generated parser given a message of another type leaves it to protobuf") {
  const auto parse = parsers::Parsers::echo_method.request_parser;
  parsers::Plain m;
  m.set_i32(5);
  m.set_text("t");
  m.set_blob("b");
  const std::string bytes = m.SerializeAsString();
  // A DynamicMessage of the same type (what a generic client parses into): the same fields.
  google::protobuf::DynamicMessageFactory factory;
  std::unique_ptr<google::protobuf::Message> dynamic(
      factory.GetPrototype(parsers::Plain::descriptor())->New());
  REQUIRE(parse(*dynamic, as_bytes(bytes)));
  CHECK(dynamic->SerializeAsString() == bytes);
  // Another type altogether: what protobuf makes of the bytes (field 1 as a repeated value, the
  // rest as unknown fields).
  parsers::Repeated other;
  parsers::Repeated expected;
  const bool parsed = parse(other, as_bytes(bytes));
  REQUIRE(parsed == expected.ParseFromString(bytes));
  CHECK(other.SerializeAsString() == expected.SerializeAsString());
}

TEST_CASE("valid_utf8 takes what RFC 3629 allows and nothing else") {
  using rdmarpc::protobuf_wire::valid_utf8;
  CHECK(valid_utf8(""));
  CHECK(valid_utf8("plain ascii"));
  CHECK(valid_utf8("h\xc3\xa9llo"));               // U+00E9
  CHECK(valid_utf8("\xe2\x82\xac"));               // U+20AC
  CHECK(valid_utf8("\xef\xbf\xbf"));               // U+FFFF
  CHECK(valid_utf8("\xf0\x90\x80\x80"));           // U+10000
  CHECK(valid_utf8("\xf4\x8f\xbf\xbf"));           // U+10FFFF
  CHECK(valid_utf8(std::string_view("a\0b", 3)));  // NUL is a character
  CHECK_FALSE(valid_utf8("\x80"));                 // a continuation byte first
  CHECK_FALSE(valid_utf8("\xc3"));                 // cut short
  CHECK_FALSE(valid_utf8("\xe2\x82"));             // cut short
  CHECK_FALSE(valid_utf8("\xc0\xaf"));             // overlong '/'
  CHECK_FALSE(valid_utf8("\xe0\x80\xaf"));         // overlong
  CHECK_FALSE(valid_utf8("\xf0\x80\x80\xaf"));     // overlong
  CHECK_FALSE(valid_utf8("\xed\xa0\x80"));         // U+D800, a surrogate
  CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80"));     // U+110000
  CHECK_FALSE(valid_utf8("\xf5\x80\x80\x80"));     // no such lead byte
  CHECK_FALSE(valid_utf8("\xc3\x28"));             // a continuation byte missing
  CHECK_FALSE(valid_utf8("\xe2\x28\xa1"));
}
