// rdmarpc health URI [SERVICE]: grpc.health.v1.Health/Check for SERVICE (default: the server as a
// whole). Prints the status; exit status 0 only for SERVING (5 for any other answer).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>

#include "cli_error.hpp"
#include "commands.hpp"
#include "generic_call.hpp"
#include "grpc/health/v1/health.pb.h"
#include "session.hpp"

namespace rdmarpc::cli {

namespace {

namespace asio = boost::asio;
using check_reply = grpc::health::v1::HealthCheckResponse;
constexpr std::string_view kCheck = "/grpc.health.v1.Health/Check";

asio::awaitable<boost::system::error_code> check(session& s, client_context& context,
                                                 const grpc::health::v1::HealthCheckRequest& request,
                                                 check_reply& reply) {
  const method_descriptor md{kCheck, method_id(kCheck), rpc_kind::unary};
  auto [ec] = co_await async_generic_call(s.channel(), md, &context, request, reply,
                                          asio::as_tuple(asio::use_awaitable));
  co_return ec;
}

}  // namespace

int run_health(const options& o) {
  if (o.arguments.size() > 1) throw cli_error(kExitUsage, "health takes at most one SERVICE");
  session s(o);
  grpc::health::v1::HealthCheckRequest request;
  if (!o.arguments.empty()) request.set_service(o.arguments[0]);
  const std::string who = o.arguments.empty() ? "server" : o.arguments[0];
  check_reply reply;
  client_context context;
  s.prepare(context);
  const auto ec = s.run(check(s, context, request, reply));
  if (ec) {
    const auto code = to_status_code(ec);
    if (code == status_code::unimplemented) {
      throw cli_error(
          exit_status_for(code),
          "the server at " + o.uri + " has no health service (grpc.health.v1.Health: UNIMPLEMENTED)");
    }
    if (code == status_code::not_found) {
      throw cli_error(exit_status_for(code),
                      who + ": SERVICE_UNKNOWN (the server's health service does not know it: " +
                          context.status_message() + ")");
    }
    throw s.call_failed("health check", ec, context);
  }
  std::cout << who << ": " << check_reply::ServingStatus_Name(reply.status()) << std::endl;
  return reply.status() == check_reply::SERVING ? kExitOk : kExitNotServing;
}

}  // namespace rdmarpc::cli
