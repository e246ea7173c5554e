#include "bench/echo_service.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace rdmarpc::bench {

boost::asio::awaitable<void> serve_stream(const StreamRequest& request,
                                          rdmarpc::server_writer<EchoReply>& writer) {
  EchoReply reply;
  reply.set_payload(std::string(request.payload_size(), 'x'));
  for (std::uint64_t sent = 0; request.count() == 0 || sent < request.count(); ++sent) {
    // The fast way to stream: write now while nothing has to wait, else wait for the window/room.
    if (!request.async_writes_only() && writer.try_write(reply)) continue;
    auto [ec] = co_await writer.async_write(reply, boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec) co_return;  // the client cancelled the stream (or its connection went): nothing to answer
  }
}

boost::asio::awaitable<void> echo_service::stream(rdmarpc::server_context& /*context*/,
                                                  const StreamRequest& request,
                                                  rdmarpc::server_writer<EchoReply>& writer) {
  return serve_stream(request, writer);
}

boost::asio::awaitable<void> callback_echo_service::stream(rdmarpc::server_context& /*context*/,
                                                           const StreamRequest& request,
                                                           rdmarpc::server_writer<EchoReply>& writer) {
  return serve_stream(request, writer);
}

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
