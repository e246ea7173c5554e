#pragma once
// rdmarpc::bench::echo_service and callback_echo_service: the rdmarpc side of the echo benchmark's
// server, implementing the generated EchoBench::Service (a coroutine handler) and
// EchoBench::CallbackService from bench/echo_bench.proto. Layer: bench (on generated code).
// Both serve EchoBench.Stream with the same coroutine (generated streaming handlers are coroutines
// in both bases): serve_stream below.
// Threading: the rpc server runs echo() on the executor it picked for the call; no shared state.

#include "echo_bench.rdmarpc.pb.h"

namespace rdmarpc::bench {

// EchoBench.Stream: writes request.count() replies (0: until the client cancels) of
// request.payload_size() bytes, one write outstanding at a time, co_awaiting each; returns when
// they are written or when a write fails (the client cancelled).
boost::asio::awaitable<void> serve_stream(const StreamRequest& request,
                                          rdmarpc::server_writer<EchoReply>& writer);

class echo_service final : public EchoBench::Service {
 public:
  // Answers with a copy of the request's payload (the gRPC baseline copies too).
  boost::asio::awaitable<EchoReply> echo(rdmarpc::server_context& context,
                                         const EchoRequest& request) override;
  boost::asio::awaitable<void> stream(rdmarpc::server_context& context, const StreamRequest& request,
                                      rdmarpc::server_writer<EchoReply>& writer) override;
};

// The same echo as a callback handler (generated EchoBench::CallbackService): it answers before it
// returns, so a call costs no coroutine and no scheduler hop on the server.
class callback_echo_service final : public EchoBench::CallbackService {
 public:
  void echo(rdmarpc::server_context& context, const EchoRequest& request, EchoReply& reply,
            rdmarpc::server_done done) override;
  boost::asio::awaitable<void> stream(rdmarpc::server_context& context, const StreamRequest& request,
                                      rdmarpc::server_writer<EchoReply>& writer) override;
};

}  // namespace rdmarpc::bench
