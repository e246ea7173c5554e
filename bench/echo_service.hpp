#pragma once
// rdmarpc::bench::echo_service and callback_echo_service: the rdmarpc side of the echo benchmark's
// server, implementing the generated EchoBench::Service (a coroutine handler) and
// EchoBench::CallbackService from bench/echo_bench.proto. Layer: bench (on generated code).
// Threading: the rpc server runs echo() on the executor it picked for the call; no shared state.

#include "echo_bench.rdmarpc.pb.h"

namespace rdmarpc::bench {

class echo_service final : public EchoBench::Service {
 public:
  // Answers with a copy of the request's payload (the gRPC baseline copies too).
  boost::asio::awaitable<EchoReply> echo(rdmarpc::server_context& context,
                                         const EchoRequest& request) override;
};

// The same echo as a callback handler (generated EchoBench::CallbackService): it answers before it
// returns, so a call costs no coroutine and no scheduler hop on the server.
class callback_echo_service final : public EchoBench::CallbackService {
 public:
  void echo(rdmarpc::server_context& context, const EchoRequest& request, EchoReply& reply,
            rdmarpc::server_done done) override;
};

}  // namespace rdmarpc::bench
