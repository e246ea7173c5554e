#pragma once
// Calls on messages known only at run time (google::protobuf::Message, e.g. DynamicMessage): a
// unary call into the caller's own reply message (rdmarpc::async_unary_call), and the
// method_descriptor of a method found in a descriptor pool. Streams need nothing of their own:
// channel::start_stream takes any MessageLite, so a client_stream<Message, Message> carries
// dynamic messages.
// Layer: tools/cli, over the public rpc API. Threading: as rdmarpc::channel (the reply is written on
// the channel's executor; the handler runs on its associated executor).

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <rdmarpc/channel.hpp>
#include <rdmarpc/method.hpp>
#include <rdmarpc/unary_call.hpp>
#include <string>
#include <utility>

namespace rdmarpc::cli {

// A method as the channel names it: "/package.Service/Method", its id and its kind. Owns the name
// the method_descriptor points into; keep it alive while calls use descriptor().
class method_ref {
 public:
  explicit method_ref(const google::protobuf::MethodDescriptor& m)
      : method_(&m), full_name_("/" + m.service()->full_name() + "/" + m.name()) {}
  method_ref(const method_ref&) = delete;
  method_ref& operator=(const method_ref&) = delete;

  const google::protobuf::MethodDescriptor& method() const noexcept { return *method_; }
  rpc_kind kind() const noexcept {
    if (method_->client_streaming()) {
      return method_->server_streaming() ? rpc_kind::bidi_streaming : rpc_kind::client_streaming;
    }
    return method_->server_streaming() ? rpc_kind::server_streaming : rpc_kind::unary;
  }
  method_descriptor descriptor() const noexcept { return {full_name_, method_id(full_name_), kind()}; }

 private:
  const google::protobuf::MethodDescriptor* method_;
  std::string full_name_;
};

// Calls unary `method` with `request` and parses the reply into `reply` (both must be of the
// method's message types, or stand in for them as the bench's do; `reply` and `context` must
// outlive the call). Completion:
// void(error_code), error_code in status_category(); on error `reply` is cleared and `context` holds
// the status message.
// Handler's associated executor and cancellation slot honoured, as for async_unary_call.
template <typename CompletionToken>
auto async_generic_call(channel& ch, const method_descriptor& method, client_context* context,
                        const google::protobuf::MessageLite& request, google::protobuf::MessageLite& reply,
                        CompletionToken&& token) {
  return async_unary_call(ch, method, context, request, reply, std::forward<CompletionToken>(token));
}

// A stream of dynamic messages (client_stream's operations take any Message of the method's types).
using generic_stream = client_stream<google::protobuf::Message, google::protobuf::Message>;

}  // namespace rdmarpc::cli
