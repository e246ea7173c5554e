// The server's admission and authentication hooks (server_options::admit_connection, check_call)
// over loopback and tcp: a refused connection fails its client's calls UNAVAILABLE while an
// admitted client carries on; a rejected call or stream ends with the hook's status and message,
// its handler never runs and its connection carries on; the hooks see the right method, metadata
// and peer.
#include "rpc/server_hooks.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "e2e_harness.hpp"
#include "rpc/stream.hpp"

using namespace rdmarpc;
using namespace rdmarpc::test;
using namespace std::chrono_literals;

namespace {

// Copies of what a hook was shown (its views die with the hook's call).
struct seen_peer {
  std::string address, transport, host;
  explicit seen_peer(const peer_info& p) : address(p.address), transport(p.transport), host(p.host) {}
};
struct seen_call {
  std::string method;
  metadata md;
  seen_peer peer;
  bool stream;
};

// Shared by a hook (server threads) and the test body; declared before the harness, so it outlives it.
template <typename T>
struct observed {
  std::mutex mutex;
  std::vector<T> items;
  void add(T t) {
    std::lock_guard lock(mutex);
    items.push_back(std::move(t));
  }
  std::vector<T> snapshot() {
    std::lock_guard lock(mutex);
    return items;
  }
};

std::string value_of(const metadata& md, std::string_view key) {
  for (const auto& [k, v] : md)
    if (k == key) return v;
  return "<none>";
}

// The example's policy: "authorization: Bearer good" may call anything but Fail; no token is
// UNAUTHENTICATED, another token PERMISSION_DENIED.
call_verdict bearer_policy(const call_info& call) {
  const std::string token = value_of(call.metadata, "authorization");
  if (token == "<none>") return {status_code::unauthenticated, "no authorization metadata"};
  if (token != "Bearer good" || call.method == test_service::fail.full_name)
    return {status_code::permission_denied, "token may not call " + std::string(call.method)};
  return {};
}

call_result call_with_token(channel& ch, const method_descriptor& m, const char* token,
                            std::string* message = nullptr) {
  client_context ctx;
  if (token != nullptr) ctx.add_metadata("authorization", token);
  auto r = call(ch, m, make_request("hi"), &ctx);
  if (message != nullptr) *message = ctx.status_message();
  return r;
}

struct stream_result {
  status_code status = status_code::unknown;
  std::string message;
  std::vector<std::string> replies;
};

// Opens Chat with `token`, writes "a" and "b" (reading each echo), then finishes.
stream_result chat(e2e_harness& h, std::shared_ptr<channel> ch, const char* token) {
  auto body = [](std::shared_ptr<channel> ch, const char* token) -> boost::asio::awaitable<stream_result> {
    constexpr auto tuple_awaitable = boost::asio::as_tuple(boost::asio::use_awaitable);
    client_context ctx;
    if (token != nullptr) ctx.add_metadata("authorization", token);
    client_stream<EchoRequest, EchoReply> s(ch->start_stream(test_service::chat, &ctx, nullptr));
    stream_result out;
    EchoRequest req;
    EchoReply reply;
    bool broken = false;
    for (const char* m : {"a", "b"}) {
      req.set_data(m);
      auto [wec] = co_await s.async_write(req, tuple_awaitable);
      if (wec) broken = true;
      if (broken) break;
      auto [rec] = co_await s.async_read(reply, tuple_awaitable);
      if (rec) broken = true;
      if (broken) break;
      out.replies.push_back(reply.data());
    }
    if (!broken) {
      auto [ec] = co_await s.async_writes_done(tuple_awaitable);
      (void)ec;
    }
    for (;;) {  // drain: nothing more is expected
      auto [rec] = co_await s.async_read(reply, tuple_awaitable);
      if (rec) break;
      out.replies.push_back(reply.data());
    }
    auto [ec] = co_await s.async_finish(tuple_awaitable);
    out.status = to_status_code(ec);
    out.message = ctx.status_message();
    co_return out;
  };
  auto fut = boost::asio::co_spawn(h.client_executor(), body(std::move(ch), token), boost::asio::use_future);
  REQUIRE(fut.wait_for(60s) == std::future_status::ready);
  return fut.get();
}

}  // namespace

TEST_CASE("server hooks: peer_info splits an address into transport and host", "[server][hooks]") {
  auto p = peer_info::from_address("tcp://10.0.0.2:5000");
  CHECK(p.transport == "tcp");
  CHECK(p.host == "10.0.0.2");
  p = peer_info::from_address("rdma://[fe80::1]:7471");
  CHECK(p.transport == "rdma");
  CHECK(p.host == "[fe80::1]");
  p = peer_info::from_address("loopback://a");
  CHECK(p.transport == "loopback");
  CHECK(p.host == "a");
  p = peer_info::from_address("tcp://fe80::1");  // a bare IPv6 address: no port to take off
  CHECK(p.host == "fe80::1");
  p = peer_info::from_address("no-scheme:1");
  CHECK(p.transport.empty());
  CHECK(p.host == "no-scheme");
  p = peer_info::from_address("");
  CHECK(p.host.empty());
}

TEST_CASE(
    "server hooks: a connection refused by admit_connection fails UNAVAILABLE, an admitted one carries on",
    "[server][hooks]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  std::atomic<bool> admit{true};
  observed<seen_peer> peers;
  server_options options;
  options.admit_connection = [&](const peer_info& p) {
    peers.add(seen_peer(p));
    return admit.load();
  };
  e2e_harness h(target, options);

  auto admitted = h.make_channel();
  REQUIRE_FALSE(call(*admitted, test_service::echo, make_request("first")).ec);
  REQUIRE(peers.snapshot().size() == 1);
  const auto first = peers.snapshot().front();
  CHECK(first.transport == target);
  if (target == "tcp") {
    CHECK(first.host == "127.0.0.1");
    CHECK(first.address.rfind("tcp://127.0.0.1:", 0) == 0);
  } else {
    CHECK(first.address == "loopback://a");
  }

  admit = false;
  auto refused = h.make_channel();
  const auto r = call(*refused, test_service::echo, make_request("refused"));
  CHECK(to_status_code(r.ec) == status_code::unavailable);
  CHECK(peers.snapshot().size() >= 2);  // a tcp channel may have come back (refused again) already
  // The admitted client is untouched; the hook is not asked again for its calls.
  const auto seen_before = peers.snapshot().size();
  for (int i = 0; i < 3; ++i) CHECK_FALSE(call(*admitted, test_service::echo, make_request("again")).ec);
  if (target == "loopback") CHECK(peers.snapshot().size() == seen_before);
  refused->close();
}

TEST_CASE("server hooks: admit_connection that throws refuses the connection", "[server][hooks]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  server_options options;
  options.admit_connection = [](const peer_info&) -> bool { throw std::runtime_error("no"); };
  e2e_harness h(target, options);
  auto ch = h.make_channel();
  CHECK(to_status_code(call(*ch, test_service::echo, make_request("x")).ec) == status_code::unavailable);
  ch->close();
}

TEST_CASE("server hooks: check_call rejects calls UNAUTHENTICATED / PERMISSION_DENIED with its message",
          "[server][hooks]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  server_options options;
  options.check_call = bearer_policy;
  e2e_harness h(target, options);
  auto ch = h.make_channel();

  std::string message;
  // Sleep counts its starts: a rejected call's handler never runs.
  auto r = call_with_token(*ch, test_service::sleep, nullptr, &message);
  CHECK(to_status_code(r.ec) == status_code::unauthenticated);
  CHECK(message == "no authorization metadata");
  r = call_with_token(*ch, test_service::sleep, "Bearer bad", &message);
  CHECK(to_status_code(r.ec) == status_code::permission_denied);
  CHECK(message == "token may not call /rdmarpc.test.Test/Sleep");
  r = call_with_token(*ch, test_service::fail, "Bearer good", &message);  // good token, forbidden method
  CHECK(to_status_code(r.ec) == status_code::permission_denied);
  CHECK(message == "token may not call /rdmarpc.test.Test/Fail");
  CHECK(h.service().sleeps_started.load() == 0);

  // The connection carries on: an authorized call on the same channel runs its handler.
  r = call_with_token(*ch, test_service::sleep, "Bearer good", &message);
  CHECK_FALSE(r.ec);
  CHECK(h.service().sleeps_started.load() == 1);
  r = call_with_token(*ch, test_service::echo, "Bearer good");
  CHECK_FALSE(r.ec);
  CHECK(r.reply.data() == "hi");
}

TEST_CASE("server hooks: check_call rejects a stream before its handler starts", "[server][hooks]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  server_options options;
  options.check_call = bearer_policy;
  e2e_harness h(target, options);
  auto ch = h.make_channel();

  auto out = chat(h, ch, nullptr);
  CHECK(out.status == status_code::unauthenticated);
  CHECK(out.message == "no authorization metadata");
  CHECK(out.replies.empty());
  out = chat(h, ch, "Bearer bad");
  CHECK(out.status == status_code::permission_denied);
  CHECK(out.message == "token may not call /rdmarpc.test.Test/Chat");
  CHECK(out.replies.empty());
  CHECK(h.service().streams_started.load() == 0);

  // The same connection serves an authorized stream and call afterwards.
  out = chat(h, ch, "Bearer good");
  CHECK(out.status == status_code::ok);
  CHECK(out.replies == std::vector<std::string>{"a", "b"});
  CHECK(h.service().streams_started.load() == 1);
  CHECK_FALSE(call_with_token(*ch, test_service::echo, "Bearer good").ec);
}

TEST_CASE("server hooks: check_call sees the method, the client's metadata and the peer", "[server][hooks]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  observed<seen_call> calls;
  observed<seen_peer> admitted;
  server_options options;
  options.admit_connection = [&](const peer_info& p) {
    admitted.add(seen_peer(p));
    return true;
  };
  options.check_call = [&](const call_info& c) {
    calls.add(seen_call{std::string(c.method), c.metadata, seen_peer(c.peer), c.stream});
    return call_verdict{};
  };
  e2e_harness h(target, options);
  auto ch = h.make_channel();

  client_context ctx;
  ctx.add_metadata("authorization", "Bearer good");
  ctx.add_metadata("x-trace", "42");
  const auto r = call(*ch, test_service::meta, make_request("hi"), &ctx);
  REQUIRE_FALSE(r.ec);
  CHECK(r.reply.data() == "authorization=Bearer good;x-trace=42;");  // the handler got the same metadata
  CHECK(chat(h, ch, "Bearer stream").status == status_code::ok);
  // An unknown method is checked too (empty name), then answered UNIMPLEMENTED.
  CHECK(to_status_code(call(*ch, test_service::unknown, make_request("?")).ec) == status_code::unimplemented);

  const auto seen = calls.snapshot();
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].method == "/rdmarpc.test.Test/Metadata");
  CHECK_FALSE(seen[0].stream);
  CHECK(seen[0].md == metadata{{"authorization", "Bearer good"}, {"x-trace", "42"}});
  CHECK(seen[1].method == "/rdmarpc.test.Test/Chat");
  CHECK(seen[1].stream);
  CHECK(seen[1].md == metadata{{"authorization", "Bearer stream"}});
  CHECK(seen[2].method.empty());
  CHECK(seen[2].md.empty());
  // The peer: the connection's, the same for every call and as admit_connection saw it.
  const auto peers = admitted.snapshot();
  REQUIRE(peers.size() == 1);
  for (const auto& c : seen) {
    CHECK(c.peer.transport == target);
    CHECK(c.peer.address == peers.front().address);
    CHECK(c.peer.host == peers.front().host);
  }
  if (target == "tcp") CHECK(seen[0].peer.host == "127.0.0.1");
}

TEST_CASE("server hooks: check_call that throws answers INTERNAL, the connection carries on",
          "[server][hooks]") {
  const std::string target = GENERATE(as<std::string>{}, "loopback", "tcp");
  CAPTURE(target);
  server_options options;
  options.check_call = [](const call_info& c) -> call_verdict {
    if (c.method == test_service::fail.full_name) throw std::runtime_error("policy store down");
    return {};
  };
  e2e_harness h(target, options);
  auto ch = h.make_channel();
  std::string message;
  const auto r = call_with_token(*ch, test_service::fail, nullptr, &message);
  CHECK(to_status_code(r.ec) == status_code::internal);
  CHECK(message == "check_call threw: policy store down");
  CHECK_FALSE(call(*ch, test_service::echo, make_request("ok")).ec);
}
