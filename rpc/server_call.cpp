#include "rpc/server_call.hpp"

#include "rpc/status.hpp"

namespace rdmarpc {

void server_done::drop() noexcept {
  if (auto t = std::move(target_)) t->call_dropped(key_, std::uncaught_exceptions() > 0);
}

void server_done::target::call_dropped(std::uint64_t key, bool unwinding) noexcept {
  call_done(key, std::make_exception_ptr(
                     status_error(status_code::internal,
                                  unwinding ? "the handler dropped its completion while an exception unwound"
                                            : "the handler dropped its completion without invoking it")));
}

}  // namespace rdmarpc
