// call_table without a channel or a server: calls by id, records and map nodes reused up to the
// spare limit, fail-all.
#include "rpc/call_table.hpp"

#include <catch2/catch.hpp>
#include <string>

namespace {

struct record {
  std::string name;
};

}  // namespace

TEST_CASE("call table: insert - find - extract by id") {
  rdmarpc::call_table<record> table(4);
  CHECK(table.empty());
  auto r = table.new_record();
  r->name = "seven";
  table.insert(7, std::move(r));
  CHECK(table.size() == 1);
  CHECK(table.contains(7));
  CHECK_FALSE(table.contains(8));
  CHECK(table.find(8) == table.end());
  CHECK(table.at(7).name == "seven");
  auto back = table.extract(table.find(7));
  REQUIRE(back);
  CHECK(back->name == "seven");
  CHECK(table.empty());
}

TEST_CASE("call table: kept records come back from new_record - as the owner left them") {
  rdmarpc::call_table<record> table(2);
  auto a = table.new_record();
  const record* address = a.get();
  a->name = "reset by the owner";
  table.keep(std::move(a));
  auto again = table.new_record();
  CHECK(again.get() == address);
  CHECK(again->name == "reset by the owner");
}

TEST_CASE("call table: no more than `spares` records are kept") {
  rdmarpc::call_table<record> table(1);
  auto a = table.new_record();
  auto b = table.new_record();
  const record* kept = a.get();
  table.keep(std::move(a));
  table.keep(std::move(b));  // beyond the limit: freed
  auto first = table.new_record();
  auto second = table.new_record();
  CHECK(first.get() == kept);
  CHECK(second.get() != kept);
  table.keep(nullptr);  // harmless
}

TEST_CASE("call table: a reused map node carries the new id") {
  rdmarpc::call_table<record> table(4);
  table.insert(1, table.new_record());
  table.keep(table.extract(table.find(1)));
  table.insert(2, table.new_record());  // reuses the node of call 1
  CHECK(table.contains(2));
  CHECK_FALSE(table.contains(1));
  CHECK(table.size() == 1);
}

TEST_CASE("call table: take_all empties the table and hands over every call") {
  rdmarpc::call_table<record> table(4);
  for (std::uint32_t id = 1; id <= 3; ++id) {
    auto r = table.new_record();
    r->name = std::to_string(id);
    table.insert(id, std::move(r));
  }
  auto all = table.take_all();
  CHECK(table.empty());
  REQUIRE(all.size() == 3);
  CHECK(all.at(2)->name == "2");
  table.insert(2, table.new_record());  // usable again
  CHECK(table.contains(2));
}
