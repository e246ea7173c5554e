#pragma once
// io_context_of: the io_context an executor runs on. Asio's I/O objects typed on
// io_context::executor_type skip the type-erased work tracking and dispatch that an
// any_io_executor costs on every operation (~150 instructions a call over tcp). Layer: transport.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <cstdint>
#include <memory>
#include <utility>

namespace rdmarpc::transport {

namespace detail {
template <std::uintptr_t... Bits>
boost::asio::io_context* io_context_of(const boost::asio::any_io_executor& ex,
                                       std::integer_sequence<std::uintptr_t, Bits...>) noexcept {
  boost::asio::io_context* io = nullptr;
  const auto try_one = [&](const auto* e) {
    if (io == nullptr && e != nullptr) io = &e->context();
  };
  (try_one(ex.target<boost::asio::io_context::basic_executor_type<std::allocator<void>, Bits>>()), ...);
  return io;
}
}  // namespace detail

// nullptr when `ex` is neither an io_context's executor (with any of its blocking, relationship
// and outstanding-work properties) nor a strand over its plain executor: a thread_pool's, say.
inline boost::asio::io_context* io_context_of(const boost::asio::any_io_executor& ex) noexcept {
  if (!ex) return nullptr;
  if (const auto* s = ex.target<boost::asio::strand<boost::asio::io_context::executor_type>>())
    return &s->get_inner_executor().context();
  return detail::io_context_of(ex, std::make_integer_sequence<std::uintptr_t, 8>{});
}

}  // namespace rdmarpc::transport
