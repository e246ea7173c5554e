#pragma once
// call_table<Record>: the calls of one channel or connection by call id, owning their records.
// An open-addressing table indexed by the id's low bits (call ids are sequential per channel, so
// they rarely collide), kept at most half full; a finished call's record is kept for the next
// call (up to `spares`), so steady traffic allocates nothing and hashes nothing. A peer choosing
// colliding ids costs probes bounded by the table's size, which the in-flight limits bound.
// Layer: rpc. Threading: its owner's executor only.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

namespace rdmarpc {

template <typename Record>
class call_table {
 public:
  // A slot: empty when its record is null.
  using value_type = std::pair<std::uint32_t, std::unique_ptr<Record>>;

  // Visits the occupied slots. Inserting or extracting invalidates every iterator.
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = call_table::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = value_type*;
    using reference = value_type&;

    iterator() noexcept = default;
    reference operator*() const noexcept { return *slot_; }
    pointer operator->() const noexcept { return slot_; }
    iterator& operator++() noexcept {
      ++slot_;
      skip_empty();
      return *this;
    }
    bool operator==(const iterator& o) const noexcept { return slot_ == o.slot_; }

   private:
    friend class call_table;
    iterator(value_type* slot, value_type* end) noexcept : slot_(slot), end_(end) { skip_empty(); }
    void skip_empty() noexcept {
      while (slot_ != end_ && !slot_->second) ++slot_;
    }
    value_type* slot_ = nullptr;
    value_type* end_ = nullptr;
  };

  explicit call_table(std::size_t spares) noexcept : spares_(spares) {}

  // A record for a new call: a kept one (as its owner left it in keep()) or a new one.
  std::unique_ptr<Record> new_record() {
    if (spare_records_.empty()) return std::make_unique<Record>();
    auto r = std::move(spare_records_.back());
    spare_records_.pop_back();
    return r;
  }
  // Keeps a finished call's record for new_record() (the owner resets it first). False when it
  // was freed instead (`spares` are kept already).
  bool keep(std::unique_ptr<Record> r) {
    if (!r || spare_records_.size() >= spares_) return false;
    spare_records_.push_back(std::move(r));
    return true;
  }
  // How many records keep() holds.
  std::size_t kept() const noexcept { return spare_records_.size(); }

  // Makes room for one more call now, so that the next insert() allocates nothing (cannot throw).
  void prepare_insert() {
    if ((size_ + 1) * 2 > slots_.size()) grow();
  }
  // Adds call `id` (which must not be present) with its record (not null).
  void insert(std::uint32_t id, std::unique_ptr<Record> r) {
    prepare_insert();
    auto& slot = slots_[free_slot_for(id)];
    slot.first = id;
    slot.second = std::move(r);
    ++size_;
  }
  // Removes the call at `it` and hands back its record.
  std::unique_ptr<Record> extract(iterator it) {
    auto r = std::move(it->second);
    --size_;
    close_gap(static_cast<std::size_t>(it.slot_ - slots_.data()));
    return r;
  }
  // Removes every call and hands them over (fail-all paths).
  std::vector<value_type> take_all() {
    std::vector<value_type> all;
    all.reserve(size_);
    for (auto& slot : slots_)
      if (slot.second) all.emplace_back(slot.first, std::move(slot.second));
    size_ = 0;
    return all;
  }

  iterator find(std::uint32_t id) noexcept {
    if (size_ == 0) return end();
    for (std::size_t i = home(id);; i = next(i)) {
      auto& slot = slots_[i];
      if (!slot.second) return end();
      if (slot.first == id) return iterator(&slot, slots_.data() + slots_.size());
    }
  }
  iterator begin() noexcept { return iterator(slots_.data(), slots_.data() + slots_.size()); }
  iterator end() noexcept { return iterator(slots_.data() + slots_.size(), slots_.data() + slots_.size()); }
  bool contains(std::uint32_t id) noexcept { return find(id) != end(); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  Record& at(std::uint32_t id) {
    const auto it = find(id);
    if (it == end()) throw std::out_of_range("call_table::at: no such call");
    return *it->second;
  }

 private:
  std::size_t home(std::uint32_t id) const noexcept { return id & (slots_.size() - 1); }
  std::size_t next(std::size_t i) const noexcept { return (i + 1) & (slots_.size() - 1); }

  std::size_t free_slot_for(std::uint32_t id) const noexcept {
    std::size_t i = home(id);
    while (slots_[i].second) i = next(i);
    return i;
  }

  void grow() {
    const std::size_t capacity = std::max<std::size_t>(16, slots_.size() * 2);
    std::vector<value_type> old = std::exchange(slots_, std::vector<value_type>(capacity));
    for (auto& slot : old)
      if (slot.second) slots_[free_slot_for(slot.first)] = std::move(slot);
  }

  // Linear probing without tombstones: after emptying slot `gap`, moves back every entry of the
  // probe run behind it whose home does not lie cyclically in (gap, i], so finds stay correct.
  void close_gap(std::size_t gap) noexcept {
    for (std::size_t i = next(gap); slots_[i].second; i = next(i)) {
      const std::size_t h = home(slots_[i].first);
      const bool stays = gap < i ? (gap < h && h <= i) : (gap < h || h <= i);
      if (stays) continue;
      slots_[gap] = std::move(slots_[i]);
      gap = i;
    }
  }

  std::size_t spares_;
  std::vector<value_type> slots_;  // a power of two in size, or empty
  std::size_t size_ = 0;
  std::vector<std::unique_ptr<Record>> spare_records_;
};

}  // namespace rdmarpc
