#pragma once
// call_table<Record>: the calls of one channel or connection by call id, owning their records.
// Records and map nodes of finished calls are kept for the next calls (up to `spares` of each),
// so steady traffic allocates neither. Layer: rpc. Threading: its owner's executor only.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rdmarpc {

template <typename Record>
class call_table {
 public:
  using map_type = std::unordered_map<std::uint32_t, std::unique_ptr<Record>>;
  using iterator = typename map_type::iterator;

  explicit call_table(std::size_t spares) noexcept : spares_(spares) {}

  // A record for a new call: a kept one (as its owner left it in keep()) or a new one.
  std::unique_ptr<Record> new_record() {
    if (spare_records_.empty()) return std::make_unique<Record>();
    auto r = std::move(spare_records_.back());
    spare_records_.pop_back();
    return r;
  }
  // Keeps a finished call's record for new_record() (the owner resets it first).
  void keep(std::unique_ptr<Record> r) {
    if (r && spare_records_.size() < spares_) spare_records_.push_back(std::move(r));
  }

  // Adds call `id` (which must not be present).
  void insert(std::uint32_t id, std::unique_ptr<Record> r) {
    if (spare_nodes_.empty()) {
      map_.emplace(id, std::move(r));
      return;
    }
    auto node = std::move(spare_nodes_.back());
    spare_nodes_.pop_back();
    node.key() = id;
    node.mapped() = std::move(r);
    map_.insert(std::move(node));
  }
  // Removes the call at `it` and hands back its record.
  std::unique_ptr<Record> extract(iterator it) {
    auto node = map_.extract(it);
    auto r = std::move(node.mapped());
    if (spare_nodes_.size() < spares_) spare_nodes_.push_back(std::move(node));
    return r;
  }
  // Removes every call and hands back the map (fail-all paths; its nodes are not kept).
  map_type take_all() noexcept { return std::exchange(map_, {}); }

  iterator find(std::uint32_t id) { return map_.find(id); }
  iterator end() noexcept { return map_.end(); }
  bool contains(std::uint32_t id) const { return map_.contains(id); }
  std::size_t size() const noexcept { return map_.size(); }
  bool empty() const noexcept { return map_.empty(); }
  Record& at(std::uint32_t id) { return *map_.at(id); }
  auto begin() noexcept { return map_.begin(); }

 private:
  std::size_t spares_;
  map_type map_;
  std::vector<std::unique_ptr<Record>> spare_records_;
  std::vector<typename map_type::node_type> spare_nodes_;
};

}  // namespace rdmarpc
