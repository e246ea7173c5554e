// server_context across the calls of one connection: the server empties a finished call's context
// at once (its client metadata may carry credentials) and reuses it for the next call.
#include "rpc/server_context.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

using rdmarpc::metadata;
using rdmarpc::server_context;
using rdmarpc::status_code;
using reuse = rdmarpc::detail::server_context_reuse;

TEST_CASE("server_context: finish() drops what the call carried, reuse() starts the next call",
          "[server_context]") {
  boost::asio::io_context io;
  const auto peer = std::make_shared<const std::string>("tcp://10.0.0.1:4000");
  server_context ctx(io.get_executor(), "/kv.Store/Get", peer, server_context::clock::time_point::max(),
                     metadata{{"authorization", "Bearer secret"}});
  ctx.set_status(status_code::not_found, "no such key");
  ctx.add_initial_metadata("i", "1");
  ctx.add_trailing_metadata("t", "2");
  ctx.mark_cancelled();

  reuse::finish(ctx);
  CHECK(ctx.client_metadata().empty());
  CHECK(ctx.method().empty());
  CHECK(ctx.status() == status_code::ok);
  CHECK(ctx.status_message().empty());
  CHECK(ctx.initial_metadata().empty());
  CHECK(ctx.trailing_metadata().empty());
  CHECK_FALSE(ctx.is_cancelled());
  CHECK(&ctx.peer() == peer.get());  // shared, not copied

  const auto deadline = server_context::clock::now() + std::chrono::seconds(1);
  metadata next{{"k", "v"}};
  reuse::reuse(ctx, "/kv.Store/Put", deadline, next);
  CHECK(next.empty());  // it got the context's emptied list in exchange
  CHECK(ctx.method() == "/kv.Store/Put");
  CHECK(ctx.deadline() == deadline);
  CHECK(ctx.client_metadata() == metadata{{"k", "v"}});
  ctx.add_trailing_metadata("count", "0");  // writable again
  CHECK(ctx.trailing_metadata().size() == 1);
  ctx.set_status(status_code::aborted, "next call's own");
  CHECK(ctx.status() == status_code::aborted);
  CHECK(&ctx.peer() == peer.get());
}

#ifdef NDEBUG
// (A build without NDEBUG asserts instead.)
TEST_CASE("server_context: a write after the call finished is ignored, not kept for the next call",
          "[server_context]") {
  boost::asio::io_context io;
  server_context ctx(io.get_executor(), "/kv.Store/Get", std::string("peer"),
                     server_context::clock::time_point::max(), metadata{});
  reuse::finish(ctx);
  ctx.set_status(status_code::internal, "late");
  ctx.add_initial_metadata("late", "1");
  ctx.add_trailing_metadata("late", "2");
  ctx.mark_cancelled();
  metadata none;
  reuse::reuse(ctx, "/kv.Store/Put", server_context::clock::time_point::max(), none);
  CHECK(ctx.status() == status_code::ok);
  CHECK(ctx.status_message().empty());
  CHECK(ctx.initial_metadata().empty());
  CHECK(ctx.trailing_metadata().empty());
  CHECK_FALSE(ctx.is_cancelled());
}
#endif

TEST_CASE("server_context: a status outside 0..16 is UNKNOWN, as the client will see it",
          "[server_context]") {
  boost::asio::io_context io;
  const auto peer = std::make_shared<const std::string>("tcp://10.0.0.1:4000");
  server_context ctx(io.get_executor(), "/kv.Store/Get", peer, server_context::clock::time_point::max(), {});
  ctx.set_status(static_cast<status_code>(200), "an application's own number");
  CHECK(ctx.status() == status_code::unknown);
  CHECK(ctx.status_message() == "an application's own number");
  ctx.set_status(status_code::unauthenticated, "the last canonical code");
  CHECK(ctx.status() == status_code::unauthenticated);
}
