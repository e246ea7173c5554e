#pragma once
// Interceptors: ordered chains of hooks that a server (server_options::interceptors) and a channel
// (channel_options::interceptors) run around every call and stream. They see the method, the
// metadata, the peer (server) and the final status; they may add metadata and refuse a call.
// server_options::check_call is an interceptor; the built-in metrics (rpc/call_metrics.hpp) are
// counted around the server's chain, not in it.
// Layer: rpc. Threading: a chain's hooks run on many threads at once (each hook says where): an
// interceptor must be thread-safe, quick, and must not block.

#include <chrono>
#include <cstddef>
#include <string_view>

#include "rpc/client_context.hpp"
#include "rpc/method.hpp"
#include "rpc/server_hooks.hpp"
#include "rpc/status.hpp"

namespace rdmarpc {

// How a call or stream ended, as on_call_end sees it.
struct call_outcome {
  status_code code = status_code::ok;
  std::string_view message;  // the status message ("" for OK)
  // Serialized message bytes: a unary call's request and reply; a stream's messages in each
  // direction. Frame headers and metadata are not counted.
  std::size_t request_bytes = 0;
  std::size_t response_bytes = 0;
  std::chrono::steady_clock::duration elapsed{};  // since on_call_start
};

// Server side. `call_info` (rpc/server_hooks.hpp) describes the call: method ("" for an unknown
// method id), method_index, client metadata, peer, stream or unary.
class server_interceptor {
 public:
  virtual ~server_interceptor() = default;

  // A call or stream about to start: its metadata passed the server's limits; nothing else was
  // done with it (an unknown method is asked too). On the connection's thread. Entries added to
  // `initial_metadata` go to the client with the response (client_context::server_initial_metadata),
  // after those of earlier interceptors and before the handler's. A verdict other than OK refuses
  // the call with that status (the client's call or stream ends with it); the handler never runs
  // and later interceptors are not asked. An exception refuses it INTERNAL.
  virtual call_verdict on_call_start(const call_info& call, rdmarpc::metadata& initial_metadata) {
    (void)call;
    (void)initial_metadata;
    return {};
  }

  // Once for every call whose on_call_start was asked (refused or not), in reverse order, when it
  // ends: its response is ready to go (a unary reply may still wait for send room after this; it is
  // counted as answered), a stream's trailers were sent, it was refused, or it ended without an
  // answer (cancelled by the client, deadline, connection lost). On the connection's thread.
  // Exceptions are logged and ignored.
  virtual void on_call_end(const call_info& call, const call_outcome& outcome) {
    (void)call;
    (void)outcome;
  }
};

// Client side.
struct client_call_info {
  const method_descriptor& method;
  const client_context* context;  // the caller's; null when it gave none
  bool stream = false;
};

class client_interceptor {
 public:
  virtual ~client_interceptor() = default;

  // A call or stream about to be sent, on the thread that starts it. Entries added to
  // `request_metadata` are sent after the caller's own (client_context::add_metadata), for this
  // call only. A verdict other than OK fails the call with that status before anything is sent
  // (later interceptors are not asked). An exception fails it INTERNAL.
  virtual call_verdict on_call_start(const client_call_info& call, rdmarpc::metadata& request_metadata) {
    (void)call;
    (void)request_metadata;
    return {};
  }

  // Once for every call whose on_call_start was asked, in reverse order, when it ends, before its
  // handler runs (a stream: when it finished), on the channel's executor. The context (if any) holds
  // the server's metadata by then; for a stream whose object the caller already dropped it is null.
  // Exceptions are logged and ignored.
  virtual void on_call_end(const client_call_info& call, const call_outcome& outcome) {
    (void)call;
    (void)outcome;
  }
};

}  // namespace rdmarpc
