// kv::memory_store (see memory_store.hpp).

#include "memory_store.hpp"

#include <rdmarpc/status.hpp>

namespace kv {

using rdmarpc::status_code;
using rdmarpc::status_error;

void memory_store::check_key(const std::string& key) const {
  if (key.empty()) throw status_error(status_code::invalid_argument, "the key is empty");
  if (key.size() > limits_.max_key_size) {
    throw status_error(status_code::invalid_argument, "the key has " + std::to_string(key.size()) +
                                                          " bytes; the limit is " +
                                                          std::to_string(limits_.max_key_size));
  }
}

GetReply memory_store::get(const GetRequest& request) const {
  check_key(request.key());
  std::lock_guard lock(mutex_);
  const auto it = items_.find(request.key());
  if (it == items_.end()) throw status_error(status_code::not_found, "no key '" + request.key() + "'");
  GetReply reply;
  reply.set_value(it->second.value);
  reply.set_version(it->second.version);
  return reply;
}

PutReply memory_store::put(const PutRequest& request) {
  check_key(request.key());
  if (request.value().size() > limits_.max_value_size) {
    throw status_error(status_code::resource_exhausted,
                       "the value has " + std::to_string(request.value().size()) + " bytes; the limit is " +
                           std::to_string(limits_.max_value_size));
  }
  std::lock_guard lock(mutex_);
  const auto it = items_.find(request.key());
  const std::uint64_t current = it == items_.end() ? 0 : it->second.version;
  if (request.has_expected_version() && request.expected_version() != current) {
    if (request.expected_version() == 0) {
      throw status_error(status_code::already_exists, "key '" + request.key() + "' already exists");
    }
    throw status_error(status_code::failed_precondition, "key '" + request.key() + "' is at version " +
                                                             std::to_string(current) + ", not " +
                                                             std::to_string(request.expected_version()));
  }
  if (it == items_.end() && items_.size() >= limits_.max_entries) {
    throw status_error(status_code::resource_exhausted, "the store is full");
  }
  item& target = it == items_.end() ? items_[request.key()] : it->second;
  target.value = request.value();
  target.version = current + 1;
  notify(WatchEvent::PUT, request.key(), target.value, target.version);
  PutReply reply;
  reply.set_version(target.version);
  return reply;
}

DeleteReply memory_store::erase(const DeleteRequest& request) {
  check_key(request.key());
  std::lock_guard lock(mutex_);
  const auto it = items_.find(request.key());
  if (it == items_.end()) throw status_error(status_code::not_found, "no key '" + request.key() + "'");
  DeleteReply reply;
  reply.set_version(it->second.version);
  notify(WatchEvent::DELETE, request.key(), {}, it->second.version);
  items_.erase(it);
  return reply;
}

ScanReply memory_store::scan(const ScanRequest& request) const {
  if (request.limit() == 0) throw status_error(status_code::invalid_argument, "limit must be at least 1");
  if (request.limit() > limits_.max_scan_limit) {
    throw status_error(status_code::out_of_range, "limit " + std::to_string(request.limit()) +
                                                      " is above the maximum of " +
                                                      std::to_string(limits_.max_scan_limit));
  }
  if (!request.end_key().empty() && request.end_key() < request.start_key()) {
    throw status_error(status_code::invalid_argument, "end_key sorts before start_key");
  }
  std::lock_guard lock(mutex_);
  ScanReply reply;
  auto it = items_.lower_bound(request.start_key());
  for (; it != items_.end(); ++it) {
    if (!request.end_key().empty() && it->first >= request.end_key()) break;
    if (static_cast<std::uint32_t>(reply.entries_size()) == request.limit()) {
      reply.set_next_key(it->first);
      break;
    }
    Entry* entry = reply.add_entries();
    entry->set_key(it->first);
    entry->set_value(it->second.value);
    entry->set_version(it->second.version);
  }
  return reply;
}

std::uint64_t memory_store::watch(std::string prefix, watch_callback on_change) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_watcher_++;
  watchers_.emplace(id, watcher{std::move(prefix), std::move(on_change)});
  return id;
}

void memory_store::unwatch(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  watchers_.erase(id);
}

void memory_store::notify(WatchEvent::Kind kind, const std::string& key, const std::string& value,
                          std::uint64_t version) const {
  if (watchers_.empty()) return;
  WatchEvent event;
  event.set_kind(kind);
  event.mutable_entry()->set_key(key);
  event.mutable_entry()->set_value(value);
  event.mutable_entry()->set_version(version);
  for (const auto& [id, w] : watchers_) {
    if (key.starts_with(w.prefix)) w.on_change(event);
  }
}

std::size_t memory_store::size() const {
  std::lock_guard lock(mutex_);
  return items_.size();
}

}  // namespace kv
