#pragma once
// Which io_context an executor runs on. Asio's I/O objects typed on io_context::executor_type skip
// the type-erased work tracking and dispatch that an any_io_executor costs on every operation
// (~150 instructions a call over tcp). Layer: transport.

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

// The io_context whose own executor `ex` is (with any of its blocking, relationship and
// outstanding-work properties), else nullptr. A strand is not: handlers must go through it, so
// I/O completing on the bare io_context executor would leave it.
inline boost::asio::io_context* io_context_of(const boost::asio::any_io_executor& ex) noexcept {
  if (!ex) return nullptr;
  return detail::io_context_of(ex, std::make_integer_sequence<std::uintptr_t, 8>{});
}

// The io_context behind `ex`: its own executor, or a strand over it (strand<io_context's
// executor>, or strand<any_io_executor> over one). nullptr for anything else: a thread_pool's.
inline boost::asio::io_context* io_context_behind(const boost::asio::any_io_executor& ex) noexcept {
  if (boost::asio::io_context* io = io_context_of(ex)) return io;
  if (const auto* s = ex.target<boost::asio::strand<boost::asio::io_context::executor_type>>())
    return &s->get_inner_executor().context();
  if (const auto* s = ex.target<boost::asio::strand<boost::asio::any_io_executor>>())
    return io_context_of(s->get_inner_executor());
  return nullptr;
}

}  // namespace rdmarpc::transport
