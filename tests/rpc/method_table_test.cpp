// Unit tests of the server's method table (rpc/method_table.hpp): lookup by wire id, slots in
// registration order, and the registration errors. No I/O.
#include "rpc/method_table.hpp"

#include <array>
#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

using namespace rdmarpc;

namespace {

// A service that only describes its methods (new_call is never used here).
class described_service final : public service {
 public:
  described_service(std::string_view name, std::vector<method_descriptor> methods)
      : name_(name), methods_(std::move(methods)) {}
  std::string_view full_name() const noexcept override { return name_; }
  std::span<const method_descriptor> methods() const noexcept override { return methods_; }
  std::unique_ptr<server_call> new_call(std::size_t) override { return nullptr; }

 private:
  std::string_view name_;
  std::vector<method_descriptor> methods_;
};

constexpr method_descriptor make(std::string_view full_name) {
  return {full_name, method_id(full_name)};
}

}  // namespace

TEST_CASE("method_table: finds methods by wire id, slots in registration order", "[method_table]") {
  described_service a("pkg.A", {make("/pkg.A/One"), make("/pkg.A/Two")});
  described_service b("pkg.B", {make("/pkg.B/One")});
  method_table table;
  table.add(a);
  table.add(b);
  REQUIRE(table.size() == 3);
  const method_entry* two = table.find(method_id("/pkg.A/Two"));
  REQUIRE(two != nullptr);
  CHECK(two->svc == &a);
  CHECK(two->index == 1);
  CHECK(two->full_name == "/pkg.A/Two");
  const method_entry* b_one = table.find(method_id("/pkg.B/One"));
  REQUIRE(b_one != nullptr);
  CHECK(b_one->svc == &b);
  CHECK(b_one->slot == 2);
  CHECK(table.find(method_id("/pkg.A/Three")) == nullptr);
}

TEST_CASE("method_table: a service added twice, by object or by name, is refused", "[method_table]") {
  described_service a("pkg.A", {make("/pkg.A/One")});
  described_service same_name("pkg.A", {make("/pkg.A/Other")});
  method_table table;
  table.add(a);
  CHECK_THROWS_AS(table.add(a), std::invalid_argument);
  CHECK_THROWS_AS(table.add(same_name), std::invalid_argument);
  CHECK(table.size() == 1);
}

TEST_CASE("method_table: a wrong id or colliding ids are refused and add nothing", "[method_table]") {
  described_service wrong("pkg.W", {make("/pkg.W/Fine"), {"/pkg.W/Bad", 12345}});
  method_table table;
  CHECK_THROWS_AS(table.add(wrong), std::invalid_argument);
  CHECK(table.size() == 0);
  CHECK(table.find(method_id("/pkg.W/Fine")) == nullptr);  // all or nothing

  described_service first("pkg.X", {make("/pkg.X/M")});
  // Same id under another name: what a hash collision looks like.
  described_service collides("pkg.Y", {make("/pkg.Y/Ok"), {"/pkg.Y/Clash", method_id("/pkg.X/M")}});
  table.add(first);
  CHECK_THROWS_AS(table.add(collides), std::invalid_argument);
  CHECK(table.size() == 1);
}

TEST_CASE("method_table: a request bound is set by full name - an unknown name is refused",
          "[method_table]") {
  described_service a("pkg.A", {make("/pkg.A/One"), make("/pkg.A/Two")});
  method_table table;
  table.add(a);
  table.limit_request_bytes("/pkg.A/Two", 512);
  CHECK(table.find(method_id("/pkg.A/Two"))->max_request_bytes == 512);
  CHECK(table.find(method_id("/pkg.A/One"))->max_request_bytes == SIZE_MAX);
  CHECK_THROWS_AS(table.limit_request_bytes("/pkg.A/Three", 1), std::invalid_argument);
  CHECK_THROWS_AS(table.limit_request_bytes("pkg.A/One", 1), std::invalid_argument);  // no leading '/'
}
