#pragma once
// Per-call client settings (deadline, metadata) and, after completion, the call's status,
// message and the server's initial and trailing metadata. Layer: rpc. Threading: set it up before the call,
// read it after completion; it must outlive the call.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "rpc/status.hpp"

namespace rdmarpc {

class server_context;

using metadata = std::vector<std::pair<std::string, std::string>>;

class client_context {
 public:
  using clock = std::chrono::steady_clock;

  void set_deadline(clock::time_point deadline) noexcept { deadline_ = deadline; }
  void set_timeout(clock::duration timeout) noexcept { deadline_ = clock::now() + timeout; }
  clock::time_point deadline() const noexcept { return deadline_; }  // max() = none
  void add_metadata(std::string key, std::string value) {
    metadata_.emplace_back(std::move(key), std::move(value));
  }
  const rdmarpc::metadata& request_metadata() const noexcept { return metadata_; }
  // A call a server handler makes on behalf of its own call `parent` (a call to another service):
  // when the call starts, its deadline is the sooner of its own and the parent's (the caller's
  // caller never waits longer), and interceptors see the parent (parent()), e.g. to carry a trace
  // id along (W3C traceparent, examples/tracing). `parent` must outlive the calls made with this
  // context (it does while the handler awaits them); set_parent(nullptr) before reusing the context
  // after the handler returned.
  void set_parent(const server_context* parent) noexcept { parent_ = parent; }
  void set_parent(const server_context& parent) noexcept { parent_ = &parent; }
  const server_context* parent() const noexcept { return parent_; }

  // Off (the default, "fail fast"): a call made while every endpoint of the channel is failing
  // (transient_failure) fails UNAVAILABLE at once. On: it waits, through reconnects and their
  // backoff, for a connection, until its deadline. Either way a call that reached the wire and
  // then lost its connection fails UNAVAILABLE; it is never sent again.
  void set_wait_for_ready(bool on) noexcept { wait_for_ready_ = on; }
  bool wait_for_ready() const noexcept { return wait_for_ready_; }

  // Filled in when the call completes.
  status_code status() const noexcept { return status_; }
  const std::string& status_message() const noexcept { return status_message_; }
  // (By reference, not by value: the channel sets it on every call, and a by-value parameter is a
  // second string move each time.)
  void set_result(status_code code, std::string&& message) {
    status_ = code;
    status_message_ = std::move(message);
  }
  void set_result(status_code code, const std::string& message) {
    status_ = code;
    status_message_ = message;
  }
  // What the server's handler set (server_context::add_initial_metadata / add_trailing_metadata),
  // in the order it added them; empty when it set none or the call failed before the server
  // answered. A reused context is cleared when its next call starts.
  const rdmarpc::metadata& server_initial_metadata() const noexcept { return server_initial_; }
  const rdmarpc::metadata& server_trailing_metadata() const noexcept { return server_trailing_; }
  rdmarpc::metadata& mutable_server_initial_metadata() noexcept { return server_initial_; }
  rdmarpc::metadata& mutable_server_trailing_metadata() noexcept { return server_trailing_; }

 private:
  clock::time_point deadline_ = clock::time_point::max();
  const server_context* parent_ = nullptr;
  bool wait_for_ready_ = false;
  rdmarpc::metadata metadata_;
  status_code status_ = status_code::unknown;
  std::string status_message_;
  rdmarpc::metadata server_initial_, server_trailing_;
};

}  // namespace rdmarpc
