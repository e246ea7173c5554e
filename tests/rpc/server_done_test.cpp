// server_done (rpc/server_done.hpp) without a server: a lent completion holds no reference on its
// target until it is moved; moved (a handler answering later), it keeps the target alive until it
// is invoked or dropped; a callback handler is handed it still lent; every way out reaches the
// target exactly once.
#include "rpc/server_done.hpp"

#include <google/protobuf/empty.pb.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <exception>
#include <memory>

#include "rpc/server_call.hpp"
#include "rpc/server_context.hpp"

namespace {

using rdmarpc::server_done;

struct heard {
  int done = 0;
  int done_lent = 0;  // of `done`: through call_done_lent
  int dropped = 0;
  std::uint64_t key = 0;
};

struct lending_target final : server_done::target, std::enable_shared_from_this<lending_target> {
  explicit lending_target(heard& h) : log(h) {}
  heard& log;
  void call_done(std::uint64_t key, std::exception_ptr /*error*/) noexcept override {
    ++log.done;
    log.key = key;
  }
  void call_dropped(std::uint64_t key, bool /*unwinding*/) noexcept override {
    ++log.dropped;
    log.key = key;
  }
  void call_done_lent(std::uint64_t key, std::exception_ptr error) noexcept override {
    ++log.done_lent;
    call_done(key, std::move(error));
  }
  std::shared_ptr<server_done::target> keep_alive() noexcept override { return shared_from_this(); }
};

}  // namespace

// A callback handler that answers at once, or keeps its completion to answer later.
struct echo_owner {
  const std::shared_ptr<lending_target>* target = nullptr;
  long references_inside = 0;
  bool keep = false;
  server_done kept;
  void handle(rdmarpc::server_context&, const google::protobuf::Empty&, google::protobuf::Empty&,
              server_done done) {
    references_inside = target->use_count();
    if (keep) {
      kept = std::move(done);
    } else {
      done();
    }
  }
};

TEST_CASE("server_done: lent to a callback handler it holds no reference - kept, it holds one until invoked",
          "[server]") {
  heard log;
  auto target = std::make_shared<lending_target>(log);
  boost::asio::io_context io;
  rdmarpc::server_context context(io.get_executor(), "/test/Method", "test-peer",
                                  rdmarpc::server_context::clock::time_point::max(), {});
  echo_owner owner;
  owner.target = &target;
  rdmarpc::callback_server_call<echo_owner, google::protobuf::Empty, google::protobuf::Empty> call(
      owner, &echo_owner::handle);
  call.start(context, server_done(server_done::lent, *target, 7), {});
  CHECK(owner.references_inside == 1);  // handed on to the handler still lent
  CHECK(log.done == 1);
  CHECK(log.done_lent == 1);  // invoked lent: the target knows it runs inside start()
  CHECK(log.key == 7);

  owner.keep = true;
  call.start(context, server_done(server_done::lent, *target, 8), {});
  CHECK(log.done == 1);
  CHECK(target.use_count() == 2);  // the handler's move took one
  owner.kept();
  CHECK(log.done == 2);
  CHECK(log.done_lent == 1);  // a kept one may be invoked anywhere: plain call_done
  CHECK(log.key == 8);
  CHECK(target.use_count() == 1);
}

TEST_CASE("server_done: moved out of a lent one, it keeps the target alive until it is invoked", "[server]") {
  heard log;
  auto target = std::make_shared<lending_target>(log);
  const std::weak_ptr<lending_target> weak = target;
  server_done lent(server_done::lent, *target, 9);
  server_done later = std::move(lent);  // a handler keeping it to answer later
  CHECK_FALSE(lent);
  CHECK(target.use_count() == 2);
  target.reset();  // the server lets go meanwhile
  REQUIRE_FALSE(weak.expired());
  later();
  CHECK(log.done == 1);
  CHECK(log.done_lent == 0);
  CHECK(log.key == 9);
  CHECK(weak.expired());  // its reference went with the answer
}

TEST_CASE("server_done: moved by assignment and dropped, the target hears call_dropped, then is let go",
          "[server]") {
  heard log;
  auto target = std::make_shared<lending_target>(log);
  const std::weak_ptr<lending_target> weak = target;
  {
    server_done lent(server_done::lent, *target, 3);
    server_done kept;
    kept = std::move(lent);
    target.reset();
    REQUIRE_FALSE(weak.expired());
  }
  CHECK(log.dropped == 1);
  CHECK(log.done == 0);
  CHECK(log.key == 3);
  CHECK(weak.expired());
}
