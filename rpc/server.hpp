#pragma once
// rdmarpc::server: listens on URIs, registers services and dispatches requests to their
// coroutine handlers. Layer: rpc.
// Threading: construct, add services and listen from one thread before serving; connections are
// spread over `threads` io_contexts that the server runs itself (0 = use the given executor).

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>

#include "rpc/service.hpp"
#include "rpc/stream_window.hpp"
#include "transport/connect.hpp"

namespace rdmarpc {

struct server_options {
  std::size_t threads = 0;  // extra io_context threads for connections
  // Calls and streams running or waiting for send room to reply, per connection. Beyond it requests are
  // refused with RESOURCE_EXHAUSTED; refusals wait for send room like replies, and a peer that
  // lets this many refusals wait too (it does not read its responses) is disconnected.
  std::size_t max_in_flight_per_connection = 1024;
  // A request's metadata (client_context::add_metadata): at most this many entries and this many
  // bytes on the wire, checked before anything is parsed or allocated. Beyond either the call is
  // refused with RESOURCE_EXHAUSTED (the connection carries on); logged once per connection.
  std::size_t max_metadata_entries = 64;
  std::size_t max_metadata_bytes = 8 * 1024;
  // Connections served at once, in all and from one peer address (its host, whatever the port).
  // A connection beyond either is closed as soon as it is accepted (its client sees UNAVAILABLE,
  // closed_by_peer); refusals are logged (the first at warning level, the rest at debug).
  std::size_t max_connections = 10000;
  // Each stream's receive window: the bytes and messages a client may send ahead of the handler's
  // reads (what a stream whose handler stopped reading holds in memory, plus one message). Never
  // below kInitialStreamWindow, which clients may use before they learn it.
  stream_window_size stream_window = kDefaultStreamWindow;
  std::size_t max_connections_per_peer = 1000;
  transport::connection_options transport;
};

class server {
 public:
  explicit server(boost::asio::any_io_executor ex, server_options options = {});
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Not owned: `s` must outlive the server. Throws std::invalid_argument on a duplicate service or
  // a method-id collision.
  void add_service(service& s);

  // Starts accepting on `uri`; returns the bound endpoint (the real port when 0 was asked for).
  transport::endpoint listen(std::string_view uri);

  // Serves an already established connection (loopback tests, custom transports).
  void serve(std::shared_ptr<transport::connection> connection);

  // Stops accepting, lets in-flight calls finish for up to `grace`, then closes every connection.
  // Completion: void() on the server's executor.
  void async_shutdown(std::chrono::steady_clock::duration grace,
                      boost::asio::any_completion_handler<void()> handler);

 private:
  class impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace rdmarpc
