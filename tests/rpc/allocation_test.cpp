// Heap allocations per unary call in steady state, client and server together, over the loopback
// transport on one thread: this binary replaces the global operator new to count (under ASan it
// counts through ASan's allocation hook). What protobuf
// allocates inside the messages (a non-empty string field is a heap std::string of its own) is
// measured alone, the same way, and not charged to the framework: the issue 9 budget is 2.
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "rpc/channel.hpp"
#include "rpc/server.hpp"
#include "rpc/unary_call.hpp"
#include "rpc_test.pb.h"
#include "test_service.hpp"
#include "tests/transport/connection_contract.hpp"  // run_until
#include "transport/loopback/loopback_transport.hpp"

namespace {
// Test-only instrumentation of this binary, not library state.
std::atomic<std::uint64_t> g_allocations{0};
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// Under ASan its allocator serves operator new itself (replacing it would mix the two): count
// through ASan's allocation hook instead, which sees every heap allocation.
// From ASan's runtime (its header, sanitizer/allocator_interface.h, is not always installed).
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*,
                                                                             std::size_t),
                                                         void (*free_hook)(const volatile void*));
namespace {
void count_allocation(const volatile void*, std::size_t) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
}
void ignore_free(const volatile void*) {}
const bool g_hooks_installed = __sanitizer_install_malloc_and_free_hooks(count_allocation, ignore_free) != 0;
}  // namespace
#else
// The replacements below pair malloc with free; GCC cannot see that once they are inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  return operator new(size);
}
void* operator new(std::size_t size, std::align_val_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const auto a = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return operator new(size, align);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& nt) noexcept {
  return operator new(size, nt);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
#endif

using namespace rdmarpc;

namespace {

// Issues `count` echo calls one after another, each from the previous one's completion handler
// (on the channel's thread: the path a closed-loop client takes).
struct caller {
  channel& ch;
  bool own_reply = false;     // parse into `reply`, reused call after call
  bool by_reference = false;  // the handler reads the reply the channel lends it, keeps nothing
  std::uint64_t remaining = 0;
  std::uint64_t ok = 0;
  test::EchoRequest request;
  test::EchoReply reply;

  void next() {
    if (remaining == 0) return;
    --remaining;
    if (own_reply) {
      async_unary_call(ch, test::test_service::echo, nullptr, request, reply,
                       [this](boost::system::error_code ec) {
                         if (!ec && reply.data() == request.data()) ++ok;
                         next();
                       });
      return;
    }
    if (by_reference) {
      async_unary_call<test::EchoReply>(ch, test::test_service::echo, nullptr, request,
                                        [this](boost::system::error_code ec, const test::EchoReply& r) {
                                          if (!ec && r.data() == request.data()) ++ok;
                                          next();
                                        });
      return;
    }
    async_unary_call<test::EchoReply>(ch, test::test_service::echo, nullptr, request,
                                      [this](boost::system::error_code ec, test::EchoReply r) {
                                        if (!ec && r.data() == request.data()) ++ok;
                                        next();
                                      });
  }
};

double allocations_per_call(boost::asio::io_context& io, caller& c, std::uint64_t calls) {
  c.ok = 0;
  c.remaining = calls;
  const std::uint64_t before = g_allocations.load();
  c.next();
  REQUIRE(test::run_until(io, [&] { return c.ok == calls; }));
  return static_cast<double>(g_allocations.load() - before) / static_cast<double>(calls);
}

}  // namespace

constexpr double kAllocationBudget = 2;  // framework allocations per call, client + server

// What the messages themselves allocate per echo call: the handler builds a new reply, and the
// client parses the reply into a new message (the server parses the request into a reused one).
// Without the handler's reply: what parsing into a new message allocates (the client's share).
double protobuf_allocations_per_call(const test::EchoRequest& request, std::uint64_t calls,
                                     bool with_handler_reply = true) {
  test::EchoReply sample;
  sample.set_data(request.data());
  const std::string wire = sample.SerializeAsString();
  std::uint64_t parsed_ok = 0;
  const std::uint64_t before = g_allocations.load();
  for (std::uint64_t i = 0; i < calls; ++i) {
    if (with_handler_reply) {
      test::EchoReply reply;
      reply.set_data(request.data());
    }
    test::EchoReply parsed;
    parsed_ok += parsed.ParseFromString(wire) ? 1 : 0;
  }
  const std::uint64_t after = g_allocations.load();
  REQUIRE(parsed_ok == calls);
  return static_cast<double>(after - before) / static_cast<double>(calls);
}

// Allocations per 64 B echo call in steady state, client + server, over loopback.
enum class reply_use { by_value, by_reference, own };

double steady_state_allocations_per_call(server_options options, reply_use use = reply_use::by_value) {
  boost::asio::io_context io(1);
  test::test_service service;
  server srv(io.get_executor(), std::move(options));
  srv.add_service(service);
  auto [client_end, server_end] =
      transport::loopback::make_loopback_pair(io.get_executor(), io.get_executor());
  srv.serve(server_end);
  auto ch = channel::create(client_end);
  caller c{*ch};
  c.own_reply = use == reply_use::own;
  c.by_reference = use == reply_use::by_reference;
#if defined(__SANITIZE_ADDRESS__)
  REQUIRE(g_hooks_installed);
#endif
  c.request.set_data(std::string(64, 'x'));  // a 64 B echo, as in bench/
  allocations_per_call(io, c, 2000);         // warm-up: pools, spare buffers and call objects fill
  const double total = allocations_per_call(io, c, 5000);
  // Close both ends and let everything finish, so nothing is left holding the other (LeakSanitizer).
  ch.reset();
  io.restart();
  io.run_for(std::chrono::seconds(10));
  return total;
}

TEST_CASE("allocations per unary call in steady state, client + server, loopback", "[alloc]") {
  const double total = steady_state_allocations_per_call({});
  test::EchoRequest request;
  request.set_data(std::string(64, 'x'));  // as the calls' requests
  const double in_messages = protobuf_allocations_per_call(request, 5000);
  const double framework = total - in_messages;
  std::printf(
      "allocations per call, client + server, loopback: %.2f (%.2f by protobuf inside the messages, "
      "%.2f by rdmarpc)\n",
      total, in_messages, framework);
#if defined(__SANITIZE_ADDRESS__)
  // ASan's allocator behind the hook counts differently from the production one (the budget is
  // checked in the normal build); here the test proves the calls and the teardown are clean.
  CHECK(total > 0);
#else
  CHECK(framework <= kAllocationBudget);
  // What the framework allocates per call today is none: one more allocation per call is a
  // regression even within the budget. Both ways: fewer than the protobuf baseline would
  // hide a framework allocation of the same number (the baseline must then be measured anew).
  CHECK(std::abs(framework) < 0.01);
#endif
}

TEST_CASE("a call into the caller's own reply message allocates no reply per call", "[alloc]") {
  const double new_reply = steady_state_allocations_per_call({});
  const double own_reply = steady_state_allocations_per_call({}, reply_use::own);
  test::EchoRequest request;
  request.set_data(std::string(64, 'x'));
  const double parse = protobuf_allocations_per_call(request, 5000, false);
  std::printf("allocations per call: a new reply each %.2f, the caller's own %.2f (a fresh parse: %.2f)\n",
              new_reply, own_reply, parse);
  CHECK(parse > 0);  // the counter works, and a fresh parse does allocate
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(std::abs(own_reply - (new_reply - parse)) < 0.01);  // exactly the parse's allocations saved
#endif
}

TEST_CASE("a handler that reads the reply by reference allocates no reply", "[alloc]") {
  const double by_value = steady_state_allocations_per_call({});
  const double by_reference = steady_state_allocations_per_call({}, reply_use::by_reference);
  const double own_reply = steady_state_allocations_per_call({}, reply_use::own);
  test::EchoRequest request;
  request.set_data(std::string(64, 'x'));
  const double parse = protobuf_allocations_per_call(request, 5000, false);
  std::printf(
      "allocations per call: reply taken by value %.2f, read by reference %.2f, the caller's own %.2f "
      "(a fresh parse: %.2f)\n",
      by_value, by_reference, own_reply, parse);
  CHECK(parse > 0);  // the counter works, and a fresh parse does allocate
#if !defined(__SANITIZE_ADDRESS__)
  // The channel lends the handler its own reply message, whose string keeps its memory from call to
  // call: as cheap as the caller's own message. Taken by value, the reply (its strings) goes with
  // the handler, and the next one is parsed anew. (What is left is the test service's: its
  // coroutine handler returns a new reply per call.)
  CHECK(std::abs(by_reference - own_reply) < 0.01);
  CHECK(std::abs(by_value - by_reference - parse) < 0.01);
#endif
}

TEST_CASE("a check_call that admits the call allocates nothing per call", "[alloc]") {
  const double without = steady_state_allocations_per_call({});
  server_options options;
  options.check_call = [](const call_info& call) {
    return call.metadata.empty() ? call_verdict{} : call_verdict{status_code::unauthenticated, "metadata"};
  };
  const double with = steady_state_allocations_per_call(std::move(options));
  std::printf("allocations per call without check_call %.2f, with %.2f\n", without, with);
  CHECK(with > 0);  // the counter works
  CHECK(with - without < 0.01);
}
