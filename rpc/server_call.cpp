#include "rpc/server_call.hpp"

#include "rpc/status.hpp"

namespace rdmarpc {

void server_done::drop() noexcept {
  target* const t = std::exchange(target_, nullptr);
  const std::shared_ptr<target> alive = std::move(keep_alive_);  // (empty if lent)
  t->call_dropped(key_, std::uncaught_exceptions() > 0);
}

void server_done::target::call_dropped(std::uint64_t key, bool unwinding) noexcept {
  call_done(key, std::make_exception_ptr(
                     status_error(status_code::internal,
                                  unwinding ? "the handler dropped its completion while an exception unwound"
                                            : "the handler dropped its completion without invoking it")));
}

}  // namespace rdmarpc
