// kv::memory_store: the example service's rules (statuses, versions, paging), without a network.

#include "memory_store.hpp"

#include <catch2/catch.hpp>
#include <rdmarpc/status.hpp>
#include <string>
#include <vector>

namespace {

using rdmarpc::status_code;

kv::PutRequest put_request(const std::string& key, const std::string& value) {
  kv::PutRequest r;
  r.set_key(key);
  r.set_value(value);
  return r;
}

kv::GetRequest get_request(const std::string& key) {
  kv::GetRequest r;
  r.set_key(key);
  return r;
}

template <typename F>
status_code status_of(F&& f) {
  try {
    f();
  } catch (const rdmarpc::status_error& e) {
    return e.code();
  }
  return status_code::ok;
}

}  // namespace

TEST_CASE("put, get and delete with versions") {
  kv::memory_store store;
  CHECK(store.put(put_request("a", "1")).version() == 1);
  CHECK(store.put(put_request("a", "2")).version() == 2);
  const auto got = store.get(get_request("a"));
  CHECK(got.value() == "2");
  CHECK(got.version() == 2);
  kv::DeleteRequest del;
  del.set_key("a");
  CHECK(store.erase(del).version() == 2);
  CHECK(status_of([&] { store.get(get_request("a")); }) == status_code::not_found);
  CHECK(status_of([&] { store.erase(del); }) == status_code::not_found);
  CHECK(store.size() == 0);
}

TEST_CASE("keys and values are validated") {
  kv::memory_store store({.max_key_size = 4, .max_value_size = 8, .max_entries = 2});
  CHECK(status_of([&] { store.put(put_request("", "x")); }) == status_code::invalid_argument);
  CHECK(status_of([&] { store.get(get_request("")); }) == status_code::invalid_argument);
  CHECK(status_of([&] { store.put(put_request("12345", "x")); }) == status_code::invalid_argument);
  CHECK(status_of([&] { store.put(put_request("k", "123456789")); }) == status_code::resource_exhausted);
  store.put(put_request("k1", "x"));
  store.put(put_request("k2", "x"));
  CHECK(status_of([&] { store.put(put_request("k3", "x")); }) == status_code::resource_exhausted);
  CHECK(status_of([&] { store.put(put_request("k2", "y")); }) == status_code::ok);  // overwrite fits
}

TEST_CASE("conditional puts") {
  kv::memory_store store;
  auto create = put_request("a", "1");
  create.set_expected_version(0);
  CHECK(store.put(create).version() == 1);
  CHECK(status_of([&] { store.put(create); }) == status_code::already_exists);
  auto update = put_request("a", "2");
  update.set_expected_version(1);
  CHECK(store.put(update).version() == 2);
  CHECK(status_of([&] { store.put(update); }) == status_code::failed_precondition);
  auto missing = put_request("b", "1");
  missing.set_expected_version(3);
  CHECK(status_of([&] { store.put(missing); }) == status_code::failed_precondition);
}

TEST_CASE("scan pages through a range") {
  kv::memory_store store;
  for (const char* k : {"a", "b", "c", "d", "e"}) store.put(put_request(k, k));
  kv::ScanRequest scan;
  scan.set_start_key("b");
  scan.set_end_key("e");
  scan.set_limit(2);
  const auto first = store.scan(scan);
  REQUIRE(first.entries_size() == 2);
  CHECK(first.entries(0).key() == "b");
  CHECK(first.entries(1).key() == "c");
  CHECK(first.next_key() == "d");
  scan.set_start_key(first.next_key());
  const auto second = store.scan(scan);
  REQUIRE(second.entries_size() == 1);
  CHECK(second.entries(0).key() == "d");
  CHECK(second.next_key().empty());

  scan.set_limit(0);
  CHECK(status_of([&] { store.scan(scan); }) == status_code::invalid_argument);
  scan.set_limit(1001);
  CHECK(status_of([&] { store.scan(scan); }) == status_code::out_of_range);
  scan.set_limit(10);
  scan.set_start_key("z");
  scan.set_end_key("a");
  CHECK(status_of([&] { store.scan(scan); }) == status_code::invalid_argument);
}

TEST_CASE("watchers see puts and deletes under their prefix in order until they unwatch") {
  kv::memory_store store;
  std::vector<std::string> seen;
  const auto id = store.watch("fruit/", [&](const kv::WatchEvent& e) {
    seen.push_back((e.kind() == kv::WatchEvent::PUT ? "put " : "delete ") + e.entry().key() + "@" +
                   std::to_string(e.entry().version()) + "=" + e.entry().value());
  });
  store.put(put_request("fruit/apple", "red"));
  store.put(put_request("veg/leek", "green"));  // not under the prefix
  store.put(put_request("fruit/apple", "green"));
  kv::DeleteRequest del;
  del.set_key("fruit/apple");
  store.erase(del);
  CHECK(status_of([&] { store.put(put_request("fruit/huge", std::string(100 * 1024, 'x'))); }) ==
        status_code::resource_exhausted);  // a failed put is no event
  store.unwatch(id);
  store.put(put_request("fruit/fig", "purple"));
  const std::vector<std::string> expected{"put fruit/apple@1=red", "put fruit/apple@2=green",
                                          "delete fruit/apple@2="};
  CHECK(seen == expected);
}
