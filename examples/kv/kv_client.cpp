// kv_client: a scripted session against kv_server that uses every method and the status codes
// the service defines, printing each call, its status and how long it took.
//   kv_client rdma://10.0.0.1:7471
// Exit status 0 only if every call behaved as expected (right status, right data).
// Keys live under a per-run prefix, so sessions can run against a long-lived server.

#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <rdmarpc/channel.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "kv.rdmarpc.pb.h"

namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using rdmarpc::status_code;
using clock_type = std::chrono::steady_clock;
constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);
constexpr auto kCallTimeout = std::chrono::seconds(5);

class session {
 public:
  session(std::shared_ptr<rdmarpc::channel> channel, std::string prefix)
      : store_(std::move(channel)), prefix_(std::move(prefix)) {}

  int calls() const { return calls_; }
  int unexpected() const { return unexpected_; }

  asio::awaitable<void> run() {
    // GCC 12 rejects braced lists (initializer_list arrays) inside co_await expressions, hence the
    // named vectors and std::string literals below.
    using namespace std::string_literals;
    const std::vector<std::string> none;
    const std::string a = key("apple"), b = key("banana"), c = key("cherry"), d = key("date");

    section("writes and reads");
    co_await put(a, "red"s, std::nullopt, status_code::ok, 1);
    co_await get(a, status_code::ok, "red"s);
    co_await put(a, "green"s, 1, status_code::ok, 2);  // conditional: we saw version 1
    co_await get(a, status_code::ok, "green"s);

    section("errors the service reports");
    co_await put(a, "yellow"s, 1, status_code::failed_precondition, 0);  // version 1 is stale
    co_await put(a, "yellow"s, 0, status_code::already_exists, 0);       // create-only, but exists
    co_await get(key("missing"s), status_code::not_found, ""s);
    co_await put(""s, "x"s, std::nullopt, status_code::invalid_argument, 0);  // empty key
    co_await put(key("huge"s), std::string(100 * 1024, 'z'), std::nullopt, status_code::resource_exhausted,
                 0);

    section("a range, page by page");
    co_await put(b, "yellow"s, 0, status_code::ok, 1);
    co_await put_with_callback(c, "dark red"s);
    co_await put(d, "brown"s, std::nullopt, status_code::ok, 1);
    const std::string end = prefix_ + "~";  // '~' sorts after every key of this session
    const std::vector<std::string> first_page{a, b, c}, second_page{d};
    auto page = co_await scan(prefix_, end, 3, status_code::ok, first_page);
    if (page) co_await scan(page->next_key(), end, 3, status_code::ok, second_page);
    co_await scan(prefix_, end, 0, status_code::invalid_argument, none);
    co_await scan(prefix_, end, 5000, status_code::out_of_range, none);
    co_await scan(end, prefix_, 10, status_code::invalid_argument, none);

    section("deletes");
    co_await erase(a, status_code::ok);
    co_await get(a, status_code::not_found, ""s);
    co_await erase(a, status_code::not_found);
    co_await erase(b, status_code::ok);
    co_await erase(c, status_code::ok);
    co_await erase(d, status_code::ok);
    co_await scan(prefix_, end, 10, status_code::ok, none);

    section("a watch sees a bulk put live (streaming calls)");
    co_await watch_bulk_put();
  }

 private:
  std::string key(const std::string& name) const { return prefix_ + name; }

  static void section(const std::string& title) { std::cout << "\n  -- " << title << "\n"; }

  // Checks the status (and, through `check`, the reply), prints one line, and returns the reply
  // when the call succeeded.
  template <typename Reply>
  std::optional<Reply> report(const std::string& what, clock_type::time_point start, error_code ec,
                              Reply reply, const rdmarpc::client_context& context, status_code expected,
                              const std::function<std::string(const Reply&, bool&)>& check) {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start).count();
    const status_code got = rdmarpc::to_status_code(ec);
    ++calls_;
    bool data_ok = true;
    std::string detail;
    if (got == status_code::ok) {
      detail = check(reply, data_ok);
    } else {
      detail = context.status_message();
    }
    const bool as_expected = got == expected && data_ok;
    if (!as_expected) ++unexpected_;
    std::printf("  [%s] %-44s -> %-20s %7lld us  %s\n", as_expected ? " ok " : "FAIL", what.c_str(),
                std::string(rdmarpc::to_string(got)).c_str(), static_cast<long long>(micros), detail.c_str());
    if (got != expected) {
      std::printf("         expected %s\n", std::string(rdmarpc::to_string(expected)).c_str());
    }
    std::fflush(stdout);
    if (got != status_code::ok) return std::nullopt;
    return reply;
  }

  asio::awaitable<void> put(const std::string& k, const std::string& value,
                            std::optional<std::uint64_t> expected_version, status_code expected,
                            std::uint64_t expected_new_version) {
    kv::PutRequest request;
    request.set_key(k);
    request.set_value(value);
    if (expected_version) request.set_expected_version(*expected_version);
    rdmarpc::client_context context;
    context.set_timeout(kCallTimeout);
    const auto start = clock_type::now();
    auto [ec, reply] = co_await store_.async_put(context, request, kAwait);
    std::string what = "Put " + shown(k) + " = " + shown(value);
    if (expected_version) what += " if version " + std::to_string(*expected_version);
    report<kv::PutReply>(what, start, ec, std::move(reply), context, expected,
                         [&](const kv::PutReply& r, bool& ok) {
                           ok = r.version() == expected_new_version;
                           return "version " + std::to_string(r.version());
                         });
  }

  // The same call in callback form: the handler runs later on the io_context; this coroutine waits
  // for it on a timer-based poll with a bound (the callback has no awaitable to return).
  asio::awaitable<void> put_with_callback(const std::string& k, const std::string& value) {
    kv::PutRequest request;
    request.set_key(k);
    request.set_value(value);
    auto context = std::make_shared<rdmarpc::client_context>();
    context->set_timeout(kCallTimeout);
    const auto start = clock_type::now();
    auto done = std::make_shared<std::optional<std::tuple<error_code, kv::PutReply>>>();
    store_.async_put(*context, request,
                     [done](error_code ec, kv::PutReply reply) { done->emplace(ec, std::move(reply)); });
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (!*done && clock_type::now() - start < kCallTimeout + std::chrono::seconds(1)) {
      timer.expires_after(std::chrono::microseconds(50));
      co_await timer.async_wait(asio::use_awaitable);
    }
    if (!*done) {
      ++calls_;
      ++unexpected_;
      std::printf("  [FAIL] Put (callback) %s: the callback never ran\n", shown(k).c_str());
      co_return;
    }
    auto& [ec, reply] = **done;
    report<kv::PutReply>("Put " + shown(k) + " = " + shown(value) + " (callback)", start, ec,
                         std::move(reply), *context, status_code::ok, [](const kv::PutReply& r, bool& ok) {
                           ok = r.version() == 1;
                           return "version " + std::to_string(r.version());
                         });
  }

  asio::awaitable<void> get(const std::string& k, status_code expected, const std::string& expected_value) {
    kv::GetRequest request;
    request.set_key(k);
    rdmarpc::client_context context;
    context.set_timeout(kCallTimeout);
    const auto start = clock_type::now();
    auto [ec, reply] = co_await store_.async_get(context, request, kAwait);
    report<kv::GetReply>("Get " + shown(k), start, ec, std::move(reply), context, expected,
                         [&](const kv::GetReply& r, bool& ok) {
                           ok = r.value() == expected_value;
                           return shown(r.value()) + " (version " + std::to_string(r.version()) + ")";
                         });
  }

  asio::awaitable<void> erase(const std::string& k, status_code expected) {
    kv::DeleteRequest request;
    request.set_key(k);
    rdmarpc::client_context context;
    context.set_timeout(kCallTimeout);
    const auto start = clock_type::now();
    auto [ec, reply] = co_await store_.async_delete(context, request, kAwait);
    report<kv::DeleteReply>(
        "Delete " + shown(k), start, ec, std::move(reply), context, expected,
        [](const kv::DeleteReply& r, bool&) { return "was version " + std::to_string(r.version()); });
  }

  asio::awaitable<std::optional<kv::ScanReply>> scan(const std::string& from, const std::string& to,
                                                     std::uint32_t limit, status_code expected,
                                                     std::vector<std::string> expected_keys) {
    kv::ScanRequest request;
    request.set_start_key(from);
    request.set_end_key(to);
    request.set_limit(limit);
    rdmarpc::client_context context;
    context.set_timeout(kCallTimeout);
    const auto start = clock_type::now();
    auto [ec, reply] = co_await store_.async_scan(context, request, kAwait);
    co_return report<kv::ScanReply>(
        "Scan [" + shown(from) + ", " + shown(to) + ") limit " + std::to_string(limit), start, ec,
        std::move(reply), context, expected, [&](const kv::ScanReply& r, bool& ok) {
          std::string keys;
          std::vector<std::string> got;
          for (const auto& e : r.entries()) {
            got.push_back(e.key());
            keys += (keys.empty() ? "" : ", ") + e.key().substr(prefix_.size());
          }
          ok = got == expected_keys;
          return std::to_string(r.entries_size()) + " entries [" + keys + "]" +
                 (r.next_key().empty() ? "" : " more from " + shown(r.next_key()));
        });
  }

  // Watch (server streaming) on ~/bulk/, then PutMany (client streaming) of three keys: the watch
  // prints each put as it arrives, then is cancelled.
  asio::awaitable<void> watch_bulk_put() {
    const std::vector<std::string> keys{key("bulk/one"), key("bulk/two"), key("bulk/three")};
    rdmarpc::client_context watch_context;
    kv::WatchRequest watch_request;
    watch_request.set_prefix(key("bulk/"));
    auto start = clock_type::now();
    auto watch = store_.watch(watch_context, watch_request);
    kv::WatchEvent event;
    auto [wec] = co_await watch.async_read(event, kAwait);
    line(!wec && event.kind() == kv::WatchEvent::WATCHING, "Watch " + shown(key("bulk/")) + " (stream)",
         start, wec, "watching");

    rdmarpc::client_context put_context;
    put_context.set_timeout(kCallTimeout);
    start = clock_type::now();
    auto bulk = store_.put_many(put_context);
    kv::PutRequest put;
    error_code ec;
    for (const auto& k : keys) {
      put.set_key(k);
      put.set_value("value of " + k.substr(prefix_.size()));
      std::tie(ec) = co_await bulk.async_write(put, kAwait);
      if (ec) break;
    }
    if (!ec) std::tie(ec) = co_await bulk.async_writes_done(kAwait);
    kv::PutManyReply reply;
    if (!ec) std::tie(ec) = co_await bulk.async_read(reply, kAwait);
    auto [fec] = co_await bulk.async_finish(kAwait);
    if (!ec) ec = fec;
    line(!ec && reply.count() == keys.size(), "PutMany 3 keys under " + shown(key("bulk/")) + " (stream)",
         start, ec, std::to_string(reply.count()) + " puts");

    for (const auto& k : keys) {
      start = clock_type::now();
      auto [rec] = co_await watch.async_read(event, kAwait);
      line(!rec && event.kind() == kv::WatchEvent::PUT && event.entry().key() == k, "  watch event", start,
           rec,
           "put " + shown(event.entry().key()) + " = " + shown(event.entry().value()) + " (version " +
               std::to_string(event.entry().version()) + ")");
    }
    start = clock_type::now();
    watch.cancel();
    auto [cec] = co_await watch.async_finish(kAwait);
    line(rdmarpc::to_status_code(cec) == status_code::cancelled, "Watch cancelled by the client", start, cec,
         "finished CANCELLED, as asked");
    for (const auto& k : keys) co_await erase(k, status_code::ok);
  }

  // One printed line for a streaming step: `ok` is whether it went as expected.
  void line(bool ok, const std::string& what, clock_type::time_point start, error_code ec,
            const std::string& detail) {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start).count();
    ++calls_;
    if (!ok) ++unexpected_;
    std::printf("  [%s] %-44s -> %-20s %7lld us  %s\n", ok ? " ok " : "FAIL", what.c_str(),
                std::string(rdmarpc::to_string(rdmarpc::to_status_code(ec))).c_str(),
                static_cast<long long>(micros), detail.c_str());
    std::fflush(stdout);
  }

  // Keys and values as printed: without the session prefix, long ones shortened.
  std::string shown(const std::string& text) const {
    std::string s = text.starts_with(prefix_) && !prefix_.empty() ? "~/" + text.substr(prefix_.size()) : text;
    if (s.size() > 24) s = s.substr(0, 12) + "...(" + std::to_string(text.size()) + " bytes)";
    return "'" + s + "'";
  }

  kv::Store::Stub store_;
  std::string prefix_;
  int calls_ = 0;
  int unexpected_ = 0;
};

}  // namespace

int main(int argc, char* argv[]) {
  if (argc != 2 || std::string(argv[1]).starts_with("-")) {
    std::cerr << "usage: kv_client URI     (e.g. rdma://10.0.0.1:7471 or tcp://127.0.0.1:7471)\n";
    return 2;
  }
  const std::string uri = argv[1];
  std::random_device random;
  const std::string prefix =
      "session-" + std::to_string(::getpid()) + "-" + std::to_string(random() % 100000) + "/";
  std::cout << "kv_client: talking to kv.Store at " << uri << " (keys under '" << prefix
            << "', shown as ~/)\n";
  try {
    asio::io_context io;
    auto channel = rdmarpc::channel::create(io.get_executor(), uri);
    session s(channel, prefix);
    bool finished = false;
    std::exception_ptr failure;
    const auto start = clock_type::now();
    asio::co_spawn(io, s.run(), [&](std::exception_ptr e) {
      finished = true;
      failure = e;
      channel->close();
    });
    io.run_for(std::chrono::seconds(120));
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start).count();
    if (failure) std::rethrow_exception(failure);
    if (!finished) {
      std::cout << "kv_client: FAILED: the session did not finish within 120 s\n";
      return 1;
    }
    std::cout << "\nkv_client: " << s.calls() << " calls in " << millis << " ms, "
              << s.calls() - s.unexpected() << " as expected, " << s.unexpected() << " unexpected\n";
    if (s.unexpected() != 0) {
      std::cout << "kv_client: FAILED\n";
      return 1;
    }
    std::cout << "kv_client: OK\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kv_client: " << e.what() << "\n";
    return 1;
  }
}
