// call_table without a channel or a server: calls by id (colliding and wrapping probes too),
// records reused up to the spare limit, fail-all, and a random walk against std::map.
#include "rpc/call_table.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <random>
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
  CHECK(table.kept() == 0);
  CHECK(table.keep(std::move(a)));
  CHECK(table.kept() == 1);
  CHECK_FALSE(table.keep(std::move(b)));  // beyond the limit: freed
  CHECK(table.kept() == 1);
  auto first = table.new_record();
  CHECK(table.kept() == 0);
  auto second = table.new_record();
  CHECK(first.get() == kept);
  CHECK(second.get() != kept);
  CHECK_FALSE(table.keep(nullptr));  // harmless
  CHECK(table.kept() == 0);
}

TEST_CASE("call table: a removed call's slot serves the next id") {
  rdmarpc::call_table<record> table(4);
  table.insert(1, table.new_record());
  table.keep(table.extract(table.find(1)));
  table.insert(2, table.new_record());
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
  CHECK(table.begin() == table.end());
  REQUIRE(all.size() == 3);
  for (const auto& [id, r] : all) CHECK(r->name == std::to_string(id));
  table.insert(2, table.new_record());  // usable again
  CHECK(table.contains(2));
}

TEST_CASE("call table: colliding ids, wrapping probes and removals in the middle of a run") {
  rdmarpc::call_table<record> table(0);
  // 16 slots at first: 15, 31 and 47 all start at slot 15 and wrap to 0 and 1; 1 then probes on.
  for (const std::uint32_t id : {15u, 31u, 47u, 1u, 17u}) {
    auto r = table.new_record();
    r->name = std::to_string(id);
    table.insert(id, std::move(r));
  }
  table.extract(table.find(31));  // the run 15, 31, 47, 1, 17 closes up behind it
  for (const std::uint32_t id : {15u, 47u, 1u, 17u}) {
    REQUIRE(table.contains(id));
    CHECK(table.at(id).name == std::to_string(id));
  }
  CHECK_FALSE(table.contains(31));
  table.extract(table.find(15));
  table.extract(table.find(1));
  CHECK(table.at(47).name == "47");
  CHECK(table.at(17).name == "17");
  CHECK(table.size() == 2);
}

TEST_CASE("call table: agrees with std::map over random inserts and removals") {
  rdmarpc::call_table<record> table(8);
  std::map<std::uint32_t, std::string> reference;
  std::mt19937 random(42);
  for (int step = 0; step < 20000; ++step) {
    // Sequential-ish ids as a channel makes them, and some far apart as a hostile peer might.
    const std::uint32_t id = random() % 4 == 0 ? static_cast<std::uint32_t>(random()) : random() % 300;
    if (reference.contains(id)) {
      auto r = table.extract(table.find(id));
      REQUIRE(r);
      CHECK(r->name == reference[id]);
      reference.erase(id);
      table.keep(std::move(r));
    } else {
      auto r = table.new_record();
      r->name = std::to_string(step);
      reference[id] = r->name;
      table.insert(id, std::move(r));
    }
    REQUIRE(table.size() == reference.size());
  }
  std::size_t visited = 0;
  for (auto& [id, r] : table) {
    REQUIRE(reference.contains(id));
    CHECK(r->name == reference[id]);
    ++visited;
  }
  CHECK(visited == reference.size());
  for (const auto& [id, name] : reference) CHECK(table.at(id).name == name);
}
