#pragma once
// server_connection: the server side of one connection. Decodes frames, parses each request
// straight from the receive buffer into a reused call object, runs the handler coroutine, and
// writes the reply straight into a send reservation (waiting for room with async_reserve when
// there is none). Bounded by server_options::max_in_flight_per_connection. Layer: rpc.
// Threading: everything runs on the connection's executor.

#include <atomic>
#include <cstdint>
#include <memory>

#include "rpc/interceptor_chain.hpp"
#include "rpc/method_table.hpp"
#include "rpc/server.hpp"
#include "transport/connection.hpp"

namespace rdmarpc {

class server_connection : public transport::connection_handler {
 public:
  // Heartbeat counters shared by every connection of a server (server_stats).
  struct heartbeat_counters {
    std::atomic<std::uint64_t> pings_sent{0}, pongs_received{0}, pings_received{0}, timeouts{0},
        too_many_pings{0};
  };

  // What a connection needs from its server (server::impl).
  class owner {
   public:
    virtual const method_table& methods() const noexcept = 0;
    virtual const server_options& options() const noexcept = 0;
    virtual bool shutting_down() const noexcept = 0;
    // A call started / finished on some connection (any connection's thread).
    virtual void call_started() noexcept = 0;
    virtual void call_finished() = 0;
    // `c` ended; called once, on its executor.
    virtual void connection_ended(server_connection* c) = 0;
    virtual heartbeat_counters& heartbeats() noexcept = 0;
    // The server's interceptors: check_call, then server_options::interceptors.
    virtual const interceptor_chain<server_interceptor>& interceptors() const noexcept = 0;
    // The built-in metrics (null without server_options::metrics); set before connections exist.
    virtual call_metrics* metrics() const noexcept = 0;

   protected:
    ~owner() = default;
  };

  static std::shared_ptr<server_connection> create(std::shared_ptr<owner> server,
                                                   std::shared_ptr<transport::connection> conn);

  // Starts reading. Call once, on get_executor().
  virtual void start() = 0;
  // Closes the connection (gracefully: committed replies are flushed). Call on get_executor().
  virtual void close() = 0;
  // Graceful shutdown: tells the client to send nothing new (going_away), serves what it sent
  // before it answered, and closes once the client answered and every call and stream finished
  // (docs/wire-format.md, Going away). Call on get_executor().
  virtual void go_away() = 0;
  virtual const boost::asio::any_io_executor& get_executor() const noexcept = 0;
  // This connection's figures now. Call on get_executor().
  virtual connection_figures figures() const = 0;

 protected:
  ~server_connection() = default;
};

}  // namespace rdmarpc
