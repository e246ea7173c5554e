#include "bench/echo_client.hpp"

#include <boost/asio/steady_timer.hpp>
#include <stdexcept>
#include <vector>

namespace rdmarpc::bench {
namespace {

using clock = closed_loop::clock;

struct slot {
  clock::time_point started;
  EchoReply reply;                  // the caller's own reply message (caller_reply)
  rdmarpc::client_context context;  // its deadline (call_timeout)
};

}  // namespace

echo_client::echo_client(boost::asio::io_context& io, std::shared_ptr<rdmarpc::channel> channel,
                         std::string transport, std::string mode)
    : io_(io),
      channel_(channel),
      stub_(std::move(channel)),
      transport_(std::move(transport)),
      mode_(std::move(mode)) {}

bench_result echo_client::run_point(std::uint64_t payload, std::uint64_t concurrency, const load_spec& load,
                                    progress& out) {
  EchoRequest request;
  request.set_payload(std::string(payload, 'x'));
  std::vector<slot> slots(concurrency);

  auto result = point_result("rdmarpc", transport_, mode_, payload, concurrency);

  const auto start = clock::now();
  closed_loop loop(load, start);
  out.begin(point_label(result), start);
  std::string first_error;

  // Issues the next call of `s`, started at `started`; its completion records it and issues the
  // following one, started at the completion's own time stamp: one clock read a call, as perftest
  // takes one time stamp an iteration. The handler captures references and a pointer, nothing that
  // allocates; it reads the reply before it starts the next call (which, with caller_reply, parses
  // into the same message).
  auto issue = [&](auto& self, slot& s, clock::time_point started) -> void {
    s.started = started;
    loop.on_start();
    const auto completed = [&, &self = self](slot& done, boost::system::error_code ec,
                                             const EchoReply& reply) {
      const auto now = clock::now();
      const bool ok = !ec && reply.payload().size() == payload;
      if (!ok && first_error.empty()) first_error = ec ? ec.message() : "short reply";
      loop.on_complete(done.started, now, ok);
      if (loop.may_start()) self(self, done, now);
      out.tick(loop, now);  // after the next call is on its way: a progress redraw is no part of it
      if (loop.finished()) io_.stop();
    };
    const auto into_slot = [completed, sp = &s](boost::system::error_code ec) {
      completed(*sp, ec, sp->reply);
    };
    // Reads the reply where the channel parsed it; or owns it (the reply's strings then go with it).
    const auto handed = [completed, sp = &s](boost::system::error_code ec, const EchoReply& reply) {
      completed(*sp, ec, reply);
    };
    const auto kept = [completed, sp = &s](boost::system::error_code ec, EchoReply reply) {
      completed(*sp, ec, reply);
    };
    if (call_timeout.count() > 0) {
      s.context.set_timeout(call_timeout);
      if (caller_reply) return stub_.async_echo(s.context, request, s.reply, into_slot);
      if (reply_by_value) return stub_.async_echo(s.context, request, kept);
      return stub_.async_echo(s.context, request, handed);
    }
    if (caller_reply) return stub_.async_echo(request, s.reply, into_slot);
    if (reply_by_value) return stub_.async_echo(request, kept);
    stub_.async_echo(request, handed);
  };

  io_.restart();
  for (auto& s : slots) {
    if (!loop.may_start()) break;
    issue(issue, s, clock::now());
  }
  if (!run_io(loop, out)) {
    // Outstanding handlers reference this frame: the process must not continue past this point
    // with them queued, so the caller treats this as fatal.
    throw std::runtime_error("rdmarpc benchmark point made no progress" +
                             (first_error.empty() ? std::string() : " (first error: " + first_error + ")"));
  }
  if (!first_error.empty()) out.note("rdmarpc call failed: " + first_error);
  fill_from(result, loop, clock::now());
  out.end(result);
  return result;
}

bool echo_client::run_io(const closed_loop& loop, progress& out) {
  // Redraws progress while calls are slow, and gives up on a point that stopped moving.
  boost::asio::steady_timer watchdog(io_);
  bool watchdog_done = false;
  bool stuck = false;
  bool point_over = false;  // run() returned: the watchdog must end, not arm itself again
  auto arm = [&](auto& self) -> void {
    watchdog.expires_after(std::chrono::milliseconds(200));
    watchdog.async_wait([&, &self = self](boost::system::error_code ec) {
      // Cancelled, or it had expired already when run() returned (cancel() then finds nothing to
      // cancel, and re-arming here would keep the loop below waiting forever: seen under callgrind).
      if (ec || point_over) {
        watchdog_done = true;
        return;
      }
      const auto now = clock::now();
      out.tick(loop, now);
      if (now > loop.give_up_at()) {
        stuck = true;
        io_.stop();
        return;
      }
      self(self);
    });
  };
  arm(arm);
  io_.run();
  point_over = true;
  watchdog.cancel();
  if (stuck) return false;
  // Let the watchdog's cancellation run now, while its frame still exists. Not poll(): in
  // busy-poll mode the transport always has a handler ready, so poll() would never return.
  // A stream's last finish may stop the io_context again meanwhile: run_one() would then return
  // at once forever (seen under valgrind), so restart it.
  while (!watchdog_done) {
    if (io_.stopped()) io_.restart();
    io_.run_one();
  }
  return true;
}

bench_result echo_client::run_stream_point(std::uint64_t payload, std::uint64_t streams,
                                           const load_spec& load, progress& out) {
  // Each stream sends until cancelled: the point decides when it has seen enough.
  StreamRequest request;
  request.set_count(0);
  request.set_payload_size(static_cast<std::uint32_t>(payload));
  request.set_async_writes_only(async_writes_only);

  // The context must outlive its stream: declared first, destroyed last.
  struct stream_slot {
    rdmarpc::client_context context;
    rdmarpc::client_stream<StreamRequest, EchoReply> stream;
    EchoReply message;
    clock::time_point started;
  };
  std::vector<stream_slot> slots(streams);

  auto result = point_result("rdmarpc", transport_, mode_, payload, streams, "server_stream");
  const auto start = clock::now();
  closed_loop loop(load, start);
  out.begin(point_label(result), start);
  std::string first_error;
  std::uint64_t open = 0;

  // A stream that stops reading (enough measured, or it broke) is cancelled and finished; the
  // last one to finish stops the io_context.
  auto close = [&](stream_slot& s) {
    s.stream.cancel();
    s.stream.async_finish([&](boost::system::error_code) {
      if (--open == 0) io_.stop();
    });
  };
  // Reads the next message of `s`; its completion records it and reads the following one, from
  // the completion's own time stamp (as issue() in run_point).
  auto read = [&](auto& self, stream_slot& s, clock::time_point started) -> void {
    s.started = started;
    loop.on_start();
    s.stream.async_read(s.message, [&, &self = self, sp = &s](boost::system::error_code ec) {
      const auto now = clock::now();
      const bool ok = !ec && sp->message.payload().size() == payload;
      if (!ok && first_error.empty()) {
        first_error =
            ec ? (rdmarpc::is_end_of_stream(ec) ? "stream ended early" : ec.message()) : "short message";
      }
      loop.on_complete(sp->started, now, ok);
      if (ok && loop.may_start()) {
        self(self, *sp, now);
      } else {
        close(*sp);
      }
      out.tick(loop, now);
    });
  };

  io_.restart();
  for (auto& s : slots) {
    s.stream = stub_.stream(s.context, request);
    ++open;
    read(read, s, clock::now());
  }
  if (!run_io(loop, out)) {
    throw std::runtime_error("rdmarpc stream point made no progress" +
                             (first_error.empty() ? std::string() : " (first error: " + first_error + ")"));
  }
  if (!first_error.empty()) out.note("rdmarpc stream failed: " + first_error);
  fill_from(result, loop, clock::now());
  out.end(result);
  return result;
}

}  // namespace rdmarpc::bench
