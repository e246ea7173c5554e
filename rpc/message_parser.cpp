// protobuf_wire::valid_utf8 (message_parser.hpp): the check protobuf makes of a proto3 string field.
#include "rpc/message_parser.hpp"

namespace rdmarpc::protobuf_wire {

bool valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* const end = p + s.size();
  while (p != end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    std::size_t n = 0;                   // continuation bytes
    unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the first one
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;  // no overlong forms
      if (c == 0xed) hi = 0x9f;  // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;  // no overlong forms
      if (c == 0xf4) hi = 0x8f;  // nothing past U+10FFFF
    } else {
      return false;  // a continuation byte first, an overlong 2-byte lead, or past U+10FFFF
    }
    if (static_cast<std::size_t>(end - p) <= n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (std::size_t i = 2; i <= n; ++i) {
      if (p[i] < 0x80 || p[i] > 0xbf) return false;
    }
    p += n + 1;
  }
  return true;
}

}  // namespace rdmarpc::protobuf_wire
