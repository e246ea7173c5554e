#pragma once
// method_table: the methods a server serves, by their wire id (method_id of the full name), with
// the checks made at registration: a service added twice, an id that is not the hash of its
// name, two methods whose ids collide. Pure: no I/O. Layer: rpc.
// Threading: filled before serving, then read-only from every connection's thread.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rpc/service.hpp"

namespace rdmarpc {

struct method_entry {
  service* svc = nullptr;
  std::size_t index = 0;  // in svc->methods()
  std::string_view full_name;
  std::size_t slot = 0;  // 0..size()-1, in registration order: where connections keep spare call objects
  // The largest request, or client stream message, it accepts (server_options::max_request_bytes_by_method).
  std::size_t max_request_bytes = SIZE_MAX;
  // The descriptor's flags: whether a unary call checks IsInitialized() on the parsed request and
  // on the reply before it goes.
  bool request_may_lack_required = true;
  bool reply_may_lack_required = true;
  message_parser request_parser = nullptr;  // the descriptor's
  message_parser reply_parser = nullptr;
};

class method_table {
 public:
  // Adds every method of `s` (not owned: it must outlive the table). Throws std::invalid_argument
  // on a duplicate service, an id that is not method_id(full name), or colliding ids; then
  // nothing of `s` was added.
  void add(service& s);

  // Sets the method `full_name`'s max_request_bytes. Throws std::invalid_argument when no added
  // service has that method.
  void limit_request_bytes(std::string_view full_name, std::size_t bytes);

  // The method with wire id `id`, or null.
  const method_entry* find(std::uint32_t id) const noexcept {
    auto it = methods_.find(id);
    return it == methods_.end() ? nullptr : &it->second;
  }
  std::size_t size() const noexcept { return methods_.size(); }
  // Full names by slot ("/kv.Store/Get"), in registration order.
  const std::vector<std::string_view>& names() const noexcept { return names_; }
  // The services added, in the order they were added.
  const std::vector<service*>& services() const noexcept { return services_; }

 private:
  std::vector<service*> services_;
  std::vector<std::string_view> names_;
  std::unordered_map<std::uint32_t, method_entry> methods_;
};

}  // namespace rdmarpc
