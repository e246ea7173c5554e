#pragma once
// rdmarpc::server: listens on URIs, registers services and dispatches requests to their
// coroutine handlers. Layer: rpc.
// Threading: construct, add services and listen from one thread before serving; connections are
// spread over `threads` io_contexts that the server runs itself (0 = use the given executor).

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rpc/call_metrics.hpp"
#include "rpc/interceptor.hpp"
#include "rpc/server_hooks.hpp"
#include "rpc/service.hpp"
#include "rpc/stream_window.hpp"
#include "transport/connect.hpp"

namespace rdmarpc {

struct server_options {
  // Extra io_context threads for connections, each context built with the concurrency hint
  // BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO (README, Latency tips): a handler that uses its own
  // sockets or descriptors on server_context::get_executor() must do so from that thread only.
  std::size_t threads = 0;
  // Calls and streams running or waiting for send room to reply, per connection. Beyond it requests are
  // refused with RESOURCE_EXHAUSTED; refusals wait for send room like replies, and a peer that
  // lets this many refusals wait too (it does not read its responses) is disconnected.
  std::size_t max_in_flight_per_connection = 1024;
  // Replies waiting for send room on one connection, in serialized bytes: what a peer that does
  // not read its responses (or reads them slower than its calls finish) makes the server hold
  // beyond the transport's send_queue_bytes. A reply that finds no room and would take the waiting
  // bytes past it gives way: the call is answered RESOURCE_EXHAUSTED (a refusal, as above) and its
  // memory let go. One reply larger than the bound may wait alone.
  std::size_t max_waiting_reply_bytes = std::size_t{64} << 20;
  // A request's metadata (client_context::add_metadata): at most this many entries and this many
  // bytes on the wire, checked before anything is parsed or allocated. Beyond either the call is
  // refused with RESOURCE_EXHAUSTED (the connection carries on); logged once per connection.
  std::size_t max_metadata_entries = 64;
  std::size_t max_metadata_bytes = 8 * 1024;
  // Per method, by full name ("/kv.Store/Put"): the largest request, or message a client sends on
  // a stream, that method accepts (serialized bytes). A larger one is refused with
  // RESOURCE_EXHAUSTED before it is parsed (a stream is reset with it; the connection carries on);
  // logged once per connection. A method not named accepts up to transport.max_message_size, which
  // also bounds what the transport buffers for any message: a bound here above it has no effect.
  // listen() and serve() throw std::invalid_argument for a name no added service has.
  std::map<std::string, std::size_t, std::less<>> max_request_bytes_by_method;
  // Connections served at once, in all and from one peer address (its host, whatever the port).
  // A connection beyond either is closed as soon as it is accepted (its client sees UNAVAILABLE,
  // connection_lost); refusals are logged (the first at warning level, the rest at debug).
  std::size_t max_connections = 10000;
  // Each stream's receive window: the bytes and messages a client may send ahead of the handler's
  // reads (what a stream whose handler stopped reading holds in memory, plus one message). Never
  // below kInitialStreamWindow, which clients may use before they learn it.
  stream_window_size stream_window = kDefaultStreamWindow;
  std::size_t max_connections_per_peer = 1000;
  // RDMA-registered (pinned) memory of this server's connections (their rings: 2 MiB + 32 KiB each
  // with the default transport options, so 4,032 connections). A connection beyond it is rejected during the
  // handshake, before anything is allocated (the client sees UNAVAILABLE, registered_memory_exhausted) and
  // logged like the connection limits. Used when transport.registered_memory is not set (set that
  // to share one budget with other servers and channels: one bound per process); 0: no bound.
  std::size_t max_registered_memory = std::size_t{8} << 30;
  // rdma: read the devices' async events (transport/rdma/device_event_monitor.hpp) on the server's
  // executor, so a failed QP, a port going down or a failed device ends the connections it concerns
  // at once. Used when transport.device_events is not set; set that to share one monitor with the
  // process's other servers and channels (one per process: a second one on the same io_context
  // reads nothing and says so at warning level; on another it takes part of the events).
  bool watch_device_events = true;
  // Admission: sees each new connection's peer (address, transport, host) before the limits above
  // and may refuse it (false). A refused connection is closed as soon as it is accepted, as one
  // beyond max_connections: the client's calls fail UNAVAILABLE (connection_lost) and a channel
  // reconnects with its backoff. Runs where the connection is accepted (the server's executor) or
  // on the thread calling serve(); keep it quick, the next accept waits for it. An exception
  // refuses the connection. Empty: every connection is admitted.
  connection_admission admit_connection;
  // Authentication / authorization: sees every request and stream_open (method, client metadata,
  // peer) once its metadata passed the limits above, before anything else is done with it (so an
  // unknown method is checked too, with an empty name). A verdict other than OK answers that call
  // (or resets that stream) with its code and message, e.g. UNAUTHENTICATED or PERMISSION_DENIED;
  // the handler never runs and the connection carries on. An exception answers INTERNAL. Runs on
  // the connection's thread, from several threads at once when `threads` > 1; it must not block.
  // Empty (the default): no check, and no cost beyond one branch per call. It is an interceptor
  // (below): the chain's first (the metrics count around the chain).
  call_check check_call;
  // Interceptors (rpc/interceptor.hpp), asked in this order about every call and stream, after
  // check_call (the metrics are not in the chain: they count each call before it is asked and
  // after its last on_call_end). Empty (the default) with metrics off: no cost beyond one branch
  // per call.
  std::vector<std::shared_ptr<server_interceptor>> interceptors;
  // The built-in per-method metrics (rpc/call_metrics.hpp; server::method_metrics(), the admin service,
  // metrics_address): calls started and finished by status, in flight, latency, bytes. Off by
  // default: a few atomic increments and two clock reads per call when on.
  bool metrics = false;
  // An HTTP endpoint serving the metrics in Prometheus' text format at GET /metrics
  // (rpc/metrics_http.hpp), e.g. "127.0.0.1:9464" (port 0: any free one, see
  // server::metrics_endpoint()). Implies metrics. Empty (the default): none. Give a wildcard or
  // another interface's address to be scraped from other hosts; it runs on a thread of its own.
  std::string metrics_address;
  // Heartbeats towards each client, as channel_options: after heartbeat_interval with nothing
  // received (a long message still moving either way counts) a ping; no answer within heartbeat_timeout ends
  // the connection (connection_lost) and cancels its calls and streams. Zero or max() in either disables
  // them. A dead or hung client is noticed within interval + timeout + one tick (the shorter of the two): 900
  // ms by default, after whatever bytes were still on their way stop moving.
  std::chrono::steady_clock::duration heartbeat_interval = std::chrono::milliseconds(300);
  std::chrono::steady_clock::duration heartbeat_timeout = std::chrono::milliseconds(300);
  // Clients may ping at most this often (gRPC's too_many_pings): a ping sooner than this after the
  // previous one is a strike; after max_ping_strikes strikes in a row the next one makes the server
  // send a connection reset (RESOURCE_EXHAUSTED, "too_many_pings") and close the connection; that
  // client's calls fail UNAVAILABLE with that message. Zero allows any rate. Default channels ping
  // at most every 600 ms (heartbeat_interval plus a tick), three times that.
  std::chrono::steady_clock::duration min_ping_interval_allowed = std::chrono::milliseconds(200);
  unsigned max_ping_strikes = 2;
  transport::connection_options transport;
};

// Counters over all connections, any thread.
struct server_stats {
  std::uint64_t pings_sent = 0;            // our heartbeats to clients
  std::uint64_t pongs_received = 0;        // their answers
  std::uint64_t pings_received = 0;        // clients' heartbeats (answered with a pong)
  std::uint64_t heartbeat_timeouts = 0;    // connections ended because a client stopped answering
  std::uint64_t too_many_pings = 0;        // connections ended because a client pinged too often
  std::uint64_t connections = 0;           // served now (accepted and not yet ended)
  std::uint64_t connections_accepted = 0;  // served since the server started
  std::uint64_t connections_refused = 0;   // closed at once: admit_connection, max_connections(_per_peer)
};

// One connection's figures (server::async_connection_figures).
struct connection_figures {
  std::string peer;                           // "tcp://10.0.0.2:50312"
  std::string kind;                           // the transport: "rdma", "tcp", "loopback"
  std::chrono::steady_clock::duration age{};  // since it was accepted
  std::uint64_t calls_started = 0;            // calls and streams, refused ones included
  std::uint64_t calls_in_flight = 0;          // calls and streams running or waiting to reply
  std::uint64_t pings_sent = 0, pongs_received = 0, pings_received = 0;  // heartbeats
  // The transport's counters: messages and bytes each way, credit stalls, credit-only messages,
  // fragments, RNR errors (rdma; must stay 0), receive reposts, completion wake-ups.
  transport::connection_stats counters;
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
  // Throws boost::system::system_error for a malformed URI or a failed bind, std::invalid_argument
  // for transport settings the URI's transport cannot use (transport::check_options: rdma's ring
  // sizes) or a max_request_bytes_by_method name no added service has, std::logic_error after
  // shutdown began.
  transport::endpoint listen(std::string_view uri);

  // Serves an already established connection (loopback tests, custom transports).
  void serve(std::shared_ptr<transport::connection> connection);

  // Graceful shutdown: stops accepting and tells every client to send nothing new on its
  // connection (going_away; clients move new calls to their other endpoints, or reconnect). What
  // a client sent before it answered is still served; a connection closes once its client
  // answered and its calls and streams finished. Completes when every connection closed, or after
  // `grace` (then the rest are closed, and their calls fail UNAVAILABLE at the clients).
  // Completion: void() on the server's executor.
  void async_shutdown(std::chrono::steady_clock::duration grace,
                      boost::asio::any_completion_handler<void()> handler);

  server_stats stats() const;

  // Per-method figures (server_options::metrics; empty when off or before listen/serve), any thread.
  std::vector<method_stats> method_metrics() const;
  // The metrics endpoint's address ("127.0.0.1:9464", its real port), once listen/serve started it;
  // nullopt without server_options::metrics_address.
  std::optional<std::string> metrics_endpoint() const;

  // Every connection's figures, each read on its connection's thread. Completion:
  // void(std::vector<connection_figures>) on the handler's associated executor (a handler without
  // one, e.g. use_future's, runs on the thread of the last connection read). Any thread.
  template <typename CompletionToken>
  auto async_connection_figures(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::vector<connection_figures>)>(
        [this](auto handler) {
          connection_figures_of_all(
              boost::asio::any_completion_handler<void(std::vector<connection_figures>)>(std::move(handler)));
        },
        token);
  }
  void connection_figures_of_all(
      boost::asio::any_completion_handler<void(std::vector<connection_figures>)> handler);

  // The full names of the services added ("kv.Store"), in the order they were added (what a
  // reflection service lists). Any thread once serving: services are added before that.
  std::vector<std::string> service_names() const;

 private:
  class impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace rdmarpc
