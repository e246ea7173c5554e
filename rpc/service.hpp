#pragma once
// The server-side contract between the rpc server and generated service bases.
// Generated `Foo::Service` classes implement rdmarpc::service; users implement the generated
// pure virtual coroutine handlers. Layer: rpc (generated code sits on top).
// Threading: dispatch() runs on the executor the server picked for the call.

#include "rpc/method.hpp"
#include "rpc/server_context.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace rdmarpc {

class service {
 public:
  virtual ~service() = default;

  virtual std::string_view full_name() const noexcept = 0;               // "kv.Store"
  virtual std::span<const method_descriptor> methods() const noexcept = 0;

  // Runs methods()[index]: parses `request` (status INVALID_ARGUMENT when it does not parse),
  // awaits the user's handler and serializes its reply into `response`. A handler reports an
  // error by throwing rdmarpc::status_error or calling ctx.set_status(); any other exception
  // becomes INTERNAL (the server catches it). `request` stays valid until the coroutine ends.
  virtual boost::asio::awaitable<void> dispatch(std::size_t index, server_context& ctx,
                                                std::span<const std::byte> request, std::string& response) = 0;
};

}  // namespace rdmarpc
