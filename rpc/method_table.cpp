#include "rpc/method_table.hpp"

#include <stdexcept>
#include <string>

namespace rdmarpc {

void method_table::add(service& s) {
  for (service* existing : services_) {
    if (existing == &s || existing->full_name() == s.full_name())
      throw std::invalid_argument("rdmarpc::server: service " + std::string(s.full_name()) + " added twice");
  }
  std::unordered_map<std::uint32_t, method_entry> added;
  const auto methods = s.methods();
  for (std::size_t i = 0; i < methods.size(); ++i) {
    const auto& m = methods[i];
    if (m.id != method_id(m.full_name))
      throw std::invalid_argument("rdmarpc::server: method " + std::string(m.full_name) +
                                  " has an id that is not method_id(full name)");
    const auto clash = [&](const method_entry& other) {
      return std::invalid_argument("rdmarpc::server: method id of " + std::string(m.full_name) +
                                   " collides with " + std::string(other.full_name));
    };
    if (auto it = methods_.find(m.id); it != methods_.end()) throw clash(it->second);
    if (auto it = added.find(m.id); it != added.end()) throw clash(it->second);
    method_entry entry{&s, i, m.full_name, methods_.size() + added.size()};
    entry.request_may_lack_required = m.request_may_lack_required;
    entry.reply_may_lack_required = m.reply_may_lack_required;
    entry.request_parser = m.request_parser;
    entry.reply_parser = m.reply_parser;
    added.emplace(m.id, entry);
  }
  names_.resize(methods_.size() + added.size());
  for (const auto& [id, entry] : added) names_[entry.slot] = entry.full_name;
  methods_.merge(added);
  services_.push_back(&s);
}

void method_table::limit_request_bytes(std::string_view full_name, std::size_t bytes) {
  auto it = methods_.find(method_id(full_name));
  if (it == methods_.end() || it->second.full_name != full_name)
    throw std::invalid_argument("rdmarpc::server: max_request_bytes_by_method names " +
                                std::string(full_name) + ", which no added service has");
  it->second.max_request_bytes = bytes;
}

}  // namespace rdmarpc
