#pragma once
// kv::store_service: the generated kv::Store::Service implemented over a memory_store.
// Layer: example. Threading: handlers may run on several threads at once (memory_store locks).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>

#include "kv.rdmarpc.pb.h"
#include "memory_store.hpp"
#include "watch_feed.hpp"

namespace kv {

class store_service final : public Store::Service {
 public:
  explicit store_service(memory_store& store) : store_(store) {}

  boost::asio::awaitable<GetReply> get(rdmarpc::server_context&, const GetRequest& request) override {
    co_return store_.get(request);
  }
  boost::asio::awaitable<PutReply> put(rdmarpc::server_context&, const PutRequest& request) override {
    co_return store_.put(request);
  }
  // rpc Delete: `delete` is a C++ keyword, so the generated handler is delete_.
  boost::asio::awaitable<DeleteReply> delete_(rdmarpc::server_context&,
                                              const DeleteRequest& request) override {
    co_return store_.erase(request);
  }
  boost::asio::awaitable<ScanReply> scan(rdmarpc::server_context&, const ScanRequest& request) override {
    co_return store_.scan(request);
  }

  // Server streaming: a WATCHING event once registered, then every change under the prefix until
  // the client cancels (the write or the wait then throws, and the watch is removed).
  boost::asio::awaitable<void> watch(rdmarpc::server_context&, const WatchRequest& request,
                                     rdmarpc::server_writer<WatchEvent>& out) override {
    auto feed = std::make_shared<watch_feed>(co_await boost::asio::this_coro::executor);
    const unwatch_on_exit registration{
        store_, store_.watch(request.prefix(), [feed](const WatchEvent& e) { feed->push(e); })};
    WatchEvent event;
    event.set_kind(WatchEvent::WATCHING);
    for (;;) {
      co_await out.async_write(event, boost::asio::use_awaitable);
      event = co_await feed->next();
    }
  }

  // Client streaming: each request is a Put, in order; the first error ends the call.
  boost::asio::awaitable<PutManyReply> put_many(rdmarpc::server_context&,
                                                rdmarpc::server_reader<PutRequest>& in) override {
    PutManyReply reply;
    PutRequest request;
    for (;;) {
      auto [ec] = co_await in.async_read(request, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (rdmarpc::is_end_of_stream(ec)) co_return reply;
      if (ec) throw boost::system::system_error(ec);
      reply.set_last_version(store_.put(request).version());
      reply.set_count(reply.count() + 1);
    }
  }

 private:
  struct unwatch_on_exit {
    memory_store& store;
    std::uint64_t id;
    ~unwatch_on_exit() { store.unwatch(id); }
  };

  memory_store& store_;
};

}  // namespace kv
