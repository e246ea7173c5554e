#pragma once
// kv::memory_store: the example KV service's data, an ordered map with per-key versions and the
// rules of kv.proto (limits, conditional puts, paging). Errors are thrown as rdmarpc::status_error
// so the service handlers stay one line each. Layer: example. Threading: all members thread-safe.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "kv.pb.h"

namespace kv {

struct store_limits {
  std::size_t max_key_size = 1024;
  std::size_t max_value_size = 64 * 1024;
  std::size_t max_entries = 100'000;
  std::uint32_t max_scan_limit = 1000;
};

class memory_store {
 public:
  explicit memory_store(store_limits limits = {}) : limits_(limits) {}

  GetReply get(const GetRequest& request) const;
  PutReply put(const PutRequest& request);
  DeleteReply erase(const DeleteRequest& request);
  ScanReply scan(const ScanRequest& request) const;

  std::size_t size() const;

  // Calls `on_change` with every put and delete of a key starting with `prefix`, in the order the
  // store applies them, until unwatch(id). It runs under the store's lock on the changing thread:
  // it must be quick and must not call back into the store (post the event somewhere).
  using watch_callback = std::function<void(const WatchEvent&)>;
  std::uint64_t watch(std::string prefix, watch_callback on_change);
  void unwatch(std::uint64_t id);

 private:
  struct watcher {
    std::string prefix;
    watch_callback on_change;
  };
  void notify(WatchEvent::Kind kind, const std::string& key, const std::string& value,
              std::uint64_t version) const;  // under mutex_

  struct item {
    std::string value;
    std::uint64_t version = 0;
  };

  void check_key(const std::string& key) const;

  store_limits limits_;
  mutable std::mutex mutex_;
  std::map<std::string, item, std::less<>> items_;
  std::map<std::uint64_t, watcher> watchers_;
  std::uint64_t next_watcher_ = 1;
};

}  // namespace kv
