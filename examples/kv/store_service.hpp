#pragma once
// kv::store_service: the generated kv::Store::Service implemented over a memory_store.
// Layer: example. Threading: handlers may run on several threads at once (memory_store locks).

#include "kv.rdmarpc.pb.h"
#include "memory_store.hpp"

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

 private:
  memory_store& store_;
};

}  // namespace kv
