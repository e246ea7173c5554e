// Callback handlers (callback_server_call, what a generated CallbackService uses): answering
// before the handler returns, later from another thread, with a status, by throwing, by dropping
// the completion, and after the client cancelled. Client and server share one io_context on the
// test thread, over the loopback transport; every wait is bounded.
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "rpc/channel.hpp"
#include "rpc/server.hpp"
#include "rpc/service.hpp"
#include "rpc/unary_call.hpp"
#include "rpc_test.pb.h"
#include "tests/transport/connection_contract.hpp"  // run_until
#include "transport/loopback/loopback_transport.hpp"

using namespace rdmarpc;
using test::EchoReply;
using test::EchoRequest;

namespace {

constexpr method_descriptor method(const char* name) {
  return {name, method_id(name)};
}

class callback_service final : public service {
 public:
  static constexpr method_descriptor now = method("/cb.Test/Now");
  static constexpr method_descriptor status = method("/cb.Test/Status");
  static constexpr method_descriptor later = method("/cb.Test/Later");
  static constexpr method_descriptor drop = method("/cb.Test/Drop");
  static constexpr method_descriptor throw_before = method("/cb.Test/ThrowBefore");
  static constexpr method_descriptor throw_after = method("/cb.Test/ThrowAfter");
  static constexpr method_descriptor hold = method("/cb.Test/Hold");
  static constexpr method_descriptor release = method("/cb.Test/Release");
  static constexpr method_descriptor catch_drop = method("/cb.Test/CatchDrop");
  static constexpr method_descriptor nested = method("/cb.Test/Nested");
  static constexpr method_descriptor answer_then_nest = method("/cb.Test/AnswerThenNest");

  ~callback_service() override {
    for (auto& t : threads_) t.join();
  }

  std::string_view full_name() const noexcept override { return "cb.Test"; }
  std::span<const method_descriptor> methods() const noexcept override { return methods_; }
  std::unique_ptr<server_call> new_call(std::size_t index) override {
    using call = callback_server_call<callback_service, EchoRequest, EchoReply>;
    static constexpr std::array handlers{&callback_service::do_now,
                                         &callback_service::do_status,
                                         &callback_service::do_later,
                                         &callback_service::do_drop,
                                         &callback_service::do_throw_before,
                                         &callback_service::do_throw_after,
                                         &callback_service::do_hold,
                                         &callback_service::do_release,
                                         &callback_service::do_catch_drop,
                                         &callback_service::do_nested,
                                         &callback_service::do_answer_then_nest};
    return index < handlers.size() ? std::make_unique<call>(*this, handlers[index]) : nullptr;
  }

  // Nested's: the io_context it runs inside its handler until `nested_until` says stop.
  boost::asio::io_context* io = nullptr;
  std::function<bool()> nested_until;
  // AnswerThenNest's: the request that runs the io_context (others just answer), and its request
  // as its handler reads it after running the io_context.
  std::string nest_for;
  std::string request_after_nesting;

  // Hold's call, kept until the test lets it finish.
  server_context* held_context = nullptr;
  server_done held_done;

 private:
  void do_now(server_context&, const EchoRequest& req, EchoReply& reply, server_done done) {
    reply.set_data(req.data());
    done();
  }
  void do_status(server_context& ctx, const EchoRequest& req, EchoReply& reply, server_done done) {
    reply.set_data("not sent");
    ctx.set_status(status_code::not_found, "no " + req.data());
    done();
  }
  void do_later(server_context&, const EchoRequest& req, EchoReply& reply, server_done done) {
    std::lock_guard lock(mutex_);
    threads_.emplace_back([&req, &reply, done = std::move(done)]() mutable {
      reply.set_data("later " + req.data());
      done();
    });
  }
  void do_drop(server_context&, const EchoRequest&, EchoReply& reply, server_done) {
    reply.set_data("dropped");
  }
  void do_throw_before(server_context&, const EchoRequest& req, EchoReply&, server_done) {
    throw status_error(status_code::permission_denied, "not for " + req.data());
  }
  void do_throw_after(server_context&, const EchoRequest& req, EchoReply& reply, server_done done) {
    reply.set_data(req.data());
    done();
    throw std::runtime_error("after the reply");
  }
  void do_hold(server_context& ctx, const EchoRequest&, EchoReply&, server_done done) {
    held_context = &ctx;
    held_done = std::move(done);
  }

  // Answers, then finishes the held Hold call (if any), both from inside its own handler.
  void do_release(server_context&, const EchoRequest&, EchoReply& reply, server_done done) {
    reply.set_data("released");
    done();
    if (held_done) held_done();
  }
  // Drops its completion while an exception unwinds, and catches the exception itself.
  void do_catch_drop(server_context&, const EchoRequest&, EchoReply&, server_done done) {
    try {
      auto moved = std::move(done);
      throw std::runtime_error("caught inside the handler");
    } catch (const std::exception&) {
    }
  }

  // Runs the io_context inside its handler (what a handler should not do, but may) until told to
  // stop, then answers.
  void do_nested(server_context&, const EchoRequest& req, EchoReply& reply, server_done done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // bounded
    while (!nested_until() && std::chrono::steady_clock::now() < give_up &&
           io->run_one_for(std::chrono::seconds(30)) > 0) {
    }
    reply.set_data("nested " + req.data());
    done();
  }

  // Answers, then runs the io_context (calls served meanwhile), then reads its request again, as a
  // handler may until it returns: nothing of its call may have been reused meanwhile.
  void do_answer_then_nest(server_context&, const EchoRequest& req, EchoReply& reply, server_done done) {
    reply.set_data("answered " + req.data());
    done();
    if (req.data() != nest_for) return;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // bounded
    while (!nested_until() && std::chrono::steady_clock::now() < give_up &&
           io->run_one_for(std::chrono::seconds(30)) > 0) {
    }
    request_after_nesting = req.data();
  }

  static constexpr std::array methods_{now,  status,  later,      drop,   throw_before,    throw_after,
                                       hold, release, catch_drop, nested, answer_then_nest};
  std::mutex mutex_;
  std::vector<std::thread> threads_;
};

struct result {
  boost::system::error_code ec;
  std::string data;
  std::string message;
};

struct fixture {
  boost::asio::io_context io{1};
  callback_service svc;
  std::optional<server> srv;
  std::shared_ptr<channel> ch;

  fixture() {
    srv.emplace(io.get_executor());
    srv->add_service(svc);
    auto [client_end, server_end] =
        transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
    srv->serve(server_end);
    ch = channel::create(client_end);
  }
  ~fixture() {
    ch.reset();
    io.restart();
    io.run_for(std::chrono::seconds(10));
  }

  // Starts a call (without a context) whose result lands in `out`.
  void start(const method_descriptor& m, const std::string& data, std::optional<result>& out) {
    EchoRequest req;
    req.set_data(data);
    async_unary_call<EchoReply>(*ch, m, nullptr, req, [&out](boost::system::error_code ec, EchoReply reply) {
      out = result{ec, reply.data(), {}};
    });
  }

  result call(const method_descriptor& m, const std::string& data) {
    std::optional<result> out;
    client_context ctx;
    EchoRequest req;
    req.set_data(data);
    async_unary_call<EchoReply>(*ch, m, &ctx, req, [&](boost::system::error_code ec, EchoReply reply) {
      out = result{ec, reply.data(), ctx.status_message()};
    });
    REQUIRE(test::run_until(
        io, [&] { return out.has_value(); }, std::chrono::seconds(30)));
    return *out;
  }
  // Starts a call that `cancel` can cancel; `outcome` gets its error code.
  void start_cancellable(const method_descriptor& m, boost::asio::cancellation_signal& cancel,
                         std::optional<boost::system::error_code>& outcome) {
    EchoRequest req;
    req.set_data("cancellable");
    async_unary_call<EchoReply>(
        *ch, m, nullptr, req,
        boost::asio::bind_cancellation_slot(
            cancel.slot(), [&outcome](boost::system::error_code ec, EchoReply) { outcome = ec; }));
  }
};

}  // namespace

TEST_CASE("a callback handler answers before it returns") {
  fixture f;
  for (int i = 0; i < 3; ++i) {  // the call object is reused
    const auto r = f.call(callback_service::now, "x" + std::to_string(i));
    CHECK_FALSE(r.ec);
    CHECK(r.data == "x" + std::to_string(i));
  }
}

TEST_CASE("a callback handler answers with the status it set") {
  fixture f;
  const auto r = f.call(callback_service::status, "key");
  CHECK(r.ec == make_error_code(status_code::not_found));
  CHECK(r.message == "no key");
  CHECK(r.data.empty());
}

TEST_CASE("a callback handler answers later from another thread") {
  fixture f;
  const auto r = f.call(callback_service::later, "y");
  CHECK_FALSE(r.ec);
  CHECK(r.data == "later y");
}

TEST_CASE("a callback handler that drops its completion answers INTERNAL") {
  fixture f;
  const auto r = f.call(callback_service::drop, "z");
  CHECK(r.ec == make_error_code(status_code::internal));
  CHECK(r.message.find("dropped its completion") != std::string::npos);
  CHECK(f.call(callback_service::now, "next").data == "next");
}

TEST_CASE("a callback handler that throws answers with the exception's status") {
  fixture f;
  const auto r = f.call(callback_service::throw_before, "me");
  CHECK(r.ec == make_error_code(status_code::permission_denied));
  CHECK(r.message == "not for me");
}

TEST_CASE("an exception after the answer leaves the answer standing") {
  fixture f;
  const auto r = f.call(callback_service::throw_after, "kept");
  CHECK_FALSE(r.ec);
  CHECK(r.data == "kept");
  CHECK(f.call(callback_service::now, "next").data == "next");
}

TEST_CASE("a held callback call sees the client's cancellation and finishes without a reply") {
  fixture f;
  boost::asio::cancellation_signal cancel;
  std::optional<boost::system::error_code> outcome;
  f.start_cancellable(callback_service::hold, cancel, outcome);
  REQUIRE(test::run_until(f.io, [&] { return f.svc.held_context != nullptr; }));
  CHECK_FALSE(f.svc.held_context->is_cancelled());
  cancel.emit(boost::asio::cancellation_type::terminal);
  REQUIRE(test::run_until(f.io, [&] { return outcome.has_value() && f.svc.held_context->is_cancelled(); }));
  CHECK(*outcome == make_error_code(status_code::cancelled));
  f.svc.held_done();  // nobody reads the reply; the call's record is released
  CHECK_FALSE(f.svc.held_done);
  CHECK(f.call(callback_service::now, "after").data == "after");
}

namespace {

// A hand-written server_call that waits for its cancellation and finishes inside the slot's
// handler, i.e. while the server is still emitting it (no generated handler does that today).
class finish_on_cancel_service final : public service {
 public:
  static constexpr method_descriptor wait = method("/cb.Cancel/Wait");
  std::string_view full_name() const noexcept override { return "cb.Cancel"; }
  std::span<const method_descriptor> methods() const noexcept override { return methods_; }
  std::unique_ptr<server_call> new_call(std::size_t index) override {
    return index == 0 ? std::make_unique<call>(*this) : nullptr;
  }
  int started = 0;
  int finished_in_slot = 0;

 private:
  class call final : public typed_server_call<EchoRequest, EchoReply> {
   public:
    explicit call(finish_on_cancel_service& owner) noexcept : owner_(&owner) {}
    void start(server_context& ctx, server_done done, boost::asio::cancellation_slot cancel) override {
      ++owner_->started;
      cancel.assign([this, &ctx, done = std::move(done)](boost::asio::cancellation_type) mutable {
        ++owner_->finished_in_slot;
        ctx.set_status(status_code::cancelled, "finished in the cancellation slot");
        done();
      });
    }

   private:
    finish_on_cancel_service* owner_;
  };
  static constexpr std::array methods_{wait};
};

}  // namespace

TEST_CASE("a call that finishes inside its cancellation slot leaves the connection serving") {
  finish_on_cancel_service waiting;  // outlives the server
  fixture f;
  f.srv->add_service(waiting);
  for (int round = 1; round <= 3; ++round) {
    boost::asio::cancellation_signal cancel;
    std::optional<boost::system::error_code> outcome;
    f.start_cancellable(finish_on_cancel_service::wait, cancel, outcome);
    REQUIRE(test::run_until(f.io, [&] { return waiting.started == round; }));
    cancel.emit(boost::asio::cancellation_type::terminal);  // the server's on_cancel emits into the slot
    REQUIRE(test::run_until(f.io, [&] { return outcome.has_value() && waiting.finished_in_slot == round; }));
    CHECK(*outcome == make_error_code(status_code::cancelled));
    CHECK(f.call(callback_service::now, "after").data == "after");
  }
}

TEST_CASE("a handler that finishes another method's held call files each call object under its own method") {
  fixture f;
  std::optional<result> held;
  client_context hold_ctx;
  EchoRequest req;
  req.set_data("h");
  async_unary_call<EchoReply>(*f.ch, callback_service::hold, &hold_ctx, req,
                              [&](boost::system::error_code ec, EchoReply reply) {
                                held = result{ec, reply.data(), hold_ctx.status_message()};
                              });
  REQUIRE(test::run_until(f.io, [&] { return f.svc.held_context != nullptr; }));
  const auto r = f.call(callback_service::release, "r");  // finishes Hold inside Release's handler
  CHECK_FALSE(r.ec);
  CHECK(r.data == "released");
  REQUIRE(test::run_until(f.io, [&] { return held.has_value(); }));
  CHECK_FALSE(held->ec);
  // Each method's next call runs its own handler on its own call object.
  for (int i = 0; i < 3; ++i) {
    CHECK(f.call(callback_service::release, "again").data == "released");
    CHECK(f.call(callback_service::now, "n").data == "n");
  }
}

TEST_CASE("a completion dropped while an exception unwinds inside the handler answers INTERNAL") {
  fixture f;
  const auto r = f.call(callback_service::catch_drop, "x");
  CHECK(r.ec == make_error_code(status_code::internal));
  CHECK(r.message.find("while an exception unwound") != std::string::npos);
  CHECK(f.call(callback_service::now, "next").data == "next");
}

TEST_CASE(
    "a callback handler that runs the io_context inside itself: the calls served meanwhile and its own all "
    "answer") {
  fixture f;
  f.svc.io = &f.io;
  std::optional<result> inner, outer;
  // The outer handler keeps running the io_context until the inner call, which arrives meanwhile
  // and is served inside it, has its reply back at the client.
  f.svc.nested_until = [&] { return inner.has_value(); };
  f.start(callback_service::nested, "outer", outer);
  f.start(callback_service::now, "inner", inner);
  REQUIRE(test::run_until(
      f.io, [&] { return outer.has_value(); }, std::chrono::seconds(30)));
  REQUIRE(inner.has_value());
  CHECK_FALSE(inner->ec);
  CHECK(inner->data == "inner");
  CHECK_FALSE(outer->ec);
  CHECK(outer->data == "nested outer");
  // Nothing of either call stayed behind: both methods serve their next calls.
  f.svc.nested_until = [] { return true; };
  CHECK(f.call(callback_service::nested, "again").data == "nested again");
  CHECK(f.call(callback_service::now, "next").data == "next");
}

TEST_CASE(
    "a callback handler that answers, then runs the io_context: the calls served meanwhile, of its own "
    "method and another, reuse nothing of its call before it returns") {
  fixture f;
  f.svc.io = &f.io;
  std::optional<result> outer, same_method, other_method;
  // The outer handler answers at once, then serves the other two calls inside its own start().
  f.svc.nest_for = "outer";
  f.svc.nested_until = [&] { return same_method.has_value() && other_method.has_value(); };
  f.start(callback_service::answer_then_nest, "outer", outer);
  f.start(callback_service::answer_then_nest, "same", same_method);
  f.start(callback_service::now, "other", other_method);
  REQUIRE(test::run_until(
      f.io, [&] { return outer.has_value() && same_method.has_value() && other_method.has_value(); },
      std::chrono::seconds(30)));
  CHECK(outer->data == "answered outer");
  CHECK(same_method->data == "answered same");
  CHECK(other_method->data == "other");
  // Read after the calls inside it finished: the outer call's request is still its own.
  REQUIRE(test::run_until(f.io, [&] { return !f.svc.request_after_nesting.empty(); }));
  CHECK(f.svc.request_after_nesting == "outer");
  CHECK(f.call(callback_service::answer_then_nest, "again").data == "answered again");
  CHECK(f.call(callback_service::now, "next").data == "next");
}
