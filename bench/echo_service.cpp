#include "bench/echo_service.hpp"

namespace rdmarpc::bench {

boost::asio::awaitable<EchoReply> echo_service::echo(rdmarpc::server_context& /*context*/,
                                                     const EchoRequest& request) {
  EchoReply reply;
  reply.set_payload(request.payload());
  co_return reply;
}

void callback_echo_service::echo(rdmarpc::server_context& /*context*/, const EchoRequest& request,
                                 EchoReply& reply, rdmarpc::server_done done) {
  reply.set_payload(request.payload());
  done();
}

}  // namespace rdmarpc::bench
