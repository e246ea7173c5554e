#pragma once
// wire_checked_reply: a reply that `rdmarpc bench` checks and drops instead of parsing it into a
// DynamicMessage. Layer: tools/cli.

#include <google/protobuf/message_lite.h>
#include <google/protobuf/parse_context.h>

#include <cstdint>
#include <string>
#include <utility>

namespace rdmarpc::cli {

// The bench's replies after the first: checked to be well-formed protobuf wire format, field by
// field, and dropped. Building a DynamicMessage per reply (reflection) would make the tool's own
// client thread the bottleneck at high concurrency and measure it rather than the server; the first
// reply is parsed into the method's real type (the probe), so a server answering the wrong type is
// still caught. A malformed reply fails the call (INTERNAL), as a parse error does.
class wire_checked_reply final : public google::protobuf::MessageLite {
 public:
  explicit wire_checked_reply(std::string type) : type_(std::move(type)) {}

  std::string GetTypeName() const override { return type_; }
  google::protobuf::MessageLite* New(google::protobuf::Arena*) const override { return nullptr; }
  void Clear() override { fields_.clear(); }  // keeps the capacity: no allocation per reply
  bool IsInitialized() const override { return true; }
  void CheckTypeAndMergeFrom(const google::protobuf::MessageLite&) override {}
  std::size_t ByteSizeLong() const override { return 0; }
  int GetCachedSize() const override { return 0; }
  const char* _InternalParse(const char* ptr, google::protobuf::internal::ParseContext* ctx) override {
    while (!ctx->Done(&ptr)) {
      std::uint32_t tag = 0;
      ptr = google::protobuf::internal::ReadTag(ptr, &tag);
      if (ptr == nullptr) return nullptr;
      if (tag == 0 || (tag & 7) == 4) {  // the end of the message, or of a group
        ctx->SetLastTag(tag);
        return ptr;
      }
      // Copies the field into fields_ (a memcpy), validating its wire type and length.
      ptr = google::protobuf::internal::UnknownFieldParse(tag, &fields_, ptr, ctx);
      if (ptr == nullptr) return nullptr;
    }
    return ptr;
  }
  std::uint8_t* _InternalSerialize(std::uint8_t* target,
                                   google::protobuf::io::EpsCopyOutputStream*) const override {
    return target;
  }

 private:
  std::string type_, fields_;
};

}  // namespace rdmarpc::cli
