#pragma once
// What a server handler knows about its call: deadline, client metadata, peer, cancellation; and
// what it sends back besides the reply: a non-OK status, initial and trailing metadata. Layer: rpc.
// Threading: use it on the executor the handler runs on, for the duration of the call only.

#include <boost/asio/any_io_executor.hpp>
#include <cassert>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "rpc/client_context.hpp"
#include "rpc/status.hpp"

namespace rdmarpc {

namespace detail {
struct server_context_reuse;
}

class server_context {
 public:
  using clock = std::chrono::steady_clock;

  // `peer` is shared by every call of a connection (no copy per call).
  server_context(boost::asio::any_io_executor executor, std::string_view method,
                 std::shared_ptr<const std::string> peer, clock::time_point deadline,
                 rdmarpc::metadata client_metadata)
      : executor_(std::move(executor)),
        method_(method),
        peer_(std::move(peer)),
        deadline_(deadline),
        client_metadata_(std::move(client_metadata)) {}
  server_context(boost::asio::any_io_executor executor, std::string_view method, std::string peer,
                 clock::time_point deadline, rdmarpc::metadata client_metadata)
      : server_context(std::move(executor), method, std::make_shared<const std::string>(std::move(peer)),
                       deadline, std::move(client_metadata)) {}

  boost::asio::any_io_executor get_executor() const noexcept { return executor_; }
  std::string_view method() const noexcept { return method_; }  // "/kv.Store/Get"
  const std::string& peer() const noexcept { return *peer_; }
  clock::time_point deadline() const noexcept { return deadline_; }  // max() = none
  const rdmarpc::metadata& client_metadata() const noexcept { return client_metadata_; }

  // True once the client cancelled, the deadline passed or the connection ended: stop working.
  // (The server also emits terminal cancellation into the handler coroutine.)
  bool is_cancelled() const noexcept { return cancelled_; }
  void mark_cancelled() noexcept {
    if (!writable()) return;
    cancelled_ = true;
  }

  // Answer with this status; the reply the handler returns is then not sent. A code outside the
  // canonical 0..16 is UNKNOWN, here as on the wire (interceptors and metrics see what the client gets).
  void set_status(status_code code, std::string message) {
    if (!writable()) return;
    status_ = canonical(code);
    status_message_ = std::move(message);
  }
  status_code status() const noexcept { return status_; }
  const std::string& status_message() const noexcept { return status_message_; }

  // Metadata for the client (client_context::server_initial_metadata / server_trailing_metadata):
  // initial metadata are response headers, trailing metadata go with the status. Both are sent
  // with the response, whatever its status; add them before the call finishes.
  void add_initial_metadata(std::string key, std::string value) {
    if (!writable()) return;
    initial_metadata_.emplace_back(std::move(key), std::move(value));
  }
  void add_trailing_metadata(std::string key, std::string value) {
    if (!writable()) return;
    trailing_metadata_.emplace_back(std::move(key), std::move(value));
  }
  const rdmarpc::metadata& initial_metadata() const noexcept { return initial_metadata_; }
  const rdmarpc::metadata& trailing_metadata() const noexcept { return trailing_metadata_; }

 private:
  friend struct detail::server_context_reuse;
  // A handler must not write to its context after done(). Such a write is ignored until the
  // record serves the next call (it would otherwise reach that call's reply); a build without
  // NDEBUG asserts.
  bool writable() const noexcept {
    assert(!finished_ && "server_context written after its call finished");
    return !finished_;
  }
  // The call ended: what it carried is let go at once (client metadata may hold credentials); the
  // response metadata lists keep their memory for the next call.
  void finish() noexcept {
    method_ = {};
    client_metadata_.clear();
    cancelled_ = false;
    status_ = status_code::ok;
    status_message_.clear();
    initial_metadata_.clear();
    trailing_metadata_.clear();
    finished_ = true;
  }
  // The next call's context on the same connection, after finish(): executor and peer stay.
  // Takes `client_metadata` by swapping: it gets this context's emptied list (and its memory).
  void reuse(std::string_view method, clock::time_point deadline, rdmarpc::metadata& client_metadata) {
    method_ = method;
    deadline_ = deadline;
    assert(finished_ && client_metadata_.empty() && "reuse() follows finish()");
    client_metadata_.swap(client_metadata);
    finished_ = false;
  }

  boost::asio::any_io_executor executor_;
  std::string_view method_;
  std::shared_ptr<const std::string> peer_;
  clock::time_point deadline_;
  rdmarpc::metadata client_metadata_;
  bool cancelled_ = false;
  status_code status_ = status_code::ok;
  std::string status_message_;
  rdmarpc::metadata initial_metadata_, trailing_metadata_;
  bool finished_ = false;  // between finish() and reuse(): writes are ignored
};

namespace detail {
// The server's way to finish() a call's context and reuse() it for the next (not for handlers).
struct server_context_reuse {
  static void finish(server_context& ctx) noexcept { ctx.finish(); }
  static void reuse(server_context& ctx, std::string_view method, server_context::clock::time_point deadline,
                    rdmarpc::metadata& client_metadata) {
    ctx.reuse(method, deadline, client_metadata);
  }
};
}  // namespace detail

}  // namespace rdmarpc
