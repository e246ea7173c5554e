#include "rpc/server_call.hpp"

#include "rpc/status.hpp"

namespace rdmarpc {

void server_done::drop() noexcept {
  const bool unwinding = std::uncaught_exceptions() > 0;
  target_.let_go([&](target& t) { t.call_dropped(key_, unwinding); });
}

void server_done::target::call_dropped(std::uint64_t key, bool unwinding) noexcept {
  call_done(key, std::make_exception_ptr(
                     status_error(status_code::internal,
                                  unwinding ? "the handler dropped its completion while an exception unwound"
                                            : "the handler dropped its completion without invoking it")));
}

}  // namespace rdmarpc
