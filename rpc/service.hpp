#pragma once
// The server-side contract between the rpc server and generated service bases.
// Generated `Foo::Service` classes implement rdmarpc::service; users implement the generated
// pure virtual coroutine handlers. Layer: rpc (generated code sits on top).
// Threading: the server uses a service from every connection thread: new_call() must be safe to
// call concurrently (generated services only read immutable state).

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "rpc/method.hpp"
#include "rpc/server_call.hpp"
#include "rpc/server_context.hpp"
#include "rpc/server_stream_call.hpp"

namespace rdmarpc {

class service {
 public:
  virtual ~service() = default;

  virtual std::string_view full_name() const noexcept = 0;  // "kv.Store"
  virtual std::span<const method_descriptor> methods() const noexcept = 0;

  // A call object for methods()[index] (null for an index out of range). The server parses the
  // request into it (INVALID_ARGUMENT when that fails), runs it and sends its reply; it keeps a
  // few per connection and method for reuse, so this is called rarely in steady state.
  virtual std::unique_ptr<server_call> new_call(std::size_t index) = 0;
  // The same for a streaming method (methods()[index].kind != unary); null for any other index.
  // One per stream (not reused).
  virtual std::unique_ptr<server_stream_call> new_stream_call(std::size_t /*index*/) { return nullptr; }
};

}  // namespace rdmarpc
