// rdmarpc_echo_bench: the rdmarpc echo benchmark (bench/echo_bench.proto through the generated
// stub), with the same client flags as grpc_echo_bench. Modes:
//   server --listen URI [--busy-poll|--adaptive]      serve until SIGINT/SIGTERM (default: event)
//   client --target URI [--busy-poll|--adaptive] [client flags]  run the payload x concurrency matrix
//   inproc [--listen URI|loopback] [client flags]     server thread + client in one process
//                                                     (loopback transport, callgrind runs)
//   idle [--listen URI] [--seconds S] [--busy-poll|--adaptive]   CPU used by a connected, idle pair
//   heartbeats [--connections N] ...                  CPU of many idle connections' heartbeats
//   frame-size [--payload LIST]                       a unary echo's request and reply frame bytes
// URIs: rdma://10.0.0.1:7471, tcp://127.0.0.1:7472 (port 0 = any, for inproc/idle).
#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <exception>
#include <future>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/bench_result.hpp"
#include "bench/common/client_options.hpp"
#include "bench/common/driver.hpp"
#include "bench/echo_client.hpp"
#include "bench/echo_service.hpp"
#include "rpc/channel.hpp"
#include "rpc/frame.hpp"
#include "rpc/server.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace {

using namespace rdmarpc::bench;
namespace asio = boost::asio;

void usage() {
  std::cerr << "usage: rdmarpc_echo_bench server --listen URI [--busy-poll|--adaptive] [--handler H]\n"
               "       rdmarpc_echo_bench client --target URI [--busy-poll|--adaptive] [client flags]\n"
               "       rdmarpc_echo_bench inproc [--listen URI|loopback] [--handler H] [client flags]\n"
               "       rdmarpc_echo_bench idle [--listen URI] [--seconds S] [--busy-poll|--adaptive] [--json "
               "PATH]\n"
               "       rdmarpc_echo_bench heartbeats [--listen URI] [--connections N] [--seconds S] "
               "[--no-heartbeats] [--heartbeat-interval MS] [--heartbeat-timeout MS] [--json PATH]\n"
               "       rdmarpc_echo_bench frame-size [--payload LIST]\n"
               "URIs: rdma://HOST:PORT, tcp://HOST:PORT\n"
               "frame-size prints, per payload, the bytes of one unary echo's request and reply frames\n"
               "          as they go on the wire (no metadata, no deadline): PAYLOAD REQUEST REPLY\n"
               "--adaptive-spin-us US  with --adaptive: how long to poll after the last completion at\n"
               "          first (transport::connection_options::adaptive_spin); default: the library's\n"
               "--adaptive-spin-max-us US  with --adaptive: the longest the spin grows to under load\n"
               "          (connection_options::adaptive_spin_max; = --adaptive-spin-us: a fixed spin)\n"
               "--handler callback (default: EchoBench::CallbackService, answers inline) or coroutine\n"
               "          (EchoBench::Service, a co_spawn per call)\n"
               "--async-writes  (--stream) the server writes each message with co_await async_write; by\n"
               "          default it uses try_write while that need not wait\n"
               "--caller-reply  unary calls parse into the caller's own reply message, one per call in\n"
               "          flight, reused (the completion is void(error_code)); by default the handler\n"
               "          reads the reply by reference, where the channel parsed it\n"
               "--reply-by-value  the handler takes the reply by value (it keeps the reply's memory,\n"
               "          so each call's reply allocates)\n"
               "--timeout-ms MS  unary calls carry a deadline MS from their start (what a deadline\n"
               "          costs); by default none\n"
               "--no-heartbeats, --heartbeat-interval MS, --heartbeat-timeout MS apply to every mode\n"
               "          (idle --no-heartbeats reports its mode as MODE-no_heartbeats)\n"
               "--metrics  the server's built-in metrics on; --interceptors  also a no-op interceptor on\n"
               "          each side (what interceptors cost)\n"
               "client flags:\n"
            << client_flags_help();
}

std::string transport_of(const std::string& uri) {
  if (uri == "loopback") return "loopback";
  return uri.substr(0, uri.find("://"));
}

struct settings {
  std::string mode;
  std::string uri = "tcp://127.0.0.1:0";
  // The bench names its mode explicitly (the library's default is adaptive).
  rdmarpc::transport::cq_polling polling = rdmarpc::transport::cq_polling::event;
  std::chrono::microseconds adaptive_spin{0};      // --adaptive-spin-us: 0 keeps the library's default
  std::chrono::microseconds adaptive_spin_max{0};  // --adaptive-spin-max-us: 0 keeps the library's default
  double idle_seconds = 5;
  bool coroutine_handler = false;             // --handler coroutine
  bool async_writes_only = false;             // --async-writes
  bool caller_reply = false;                  // --caller-reply
  bool reply_by_value = false;                // --reply-by-value
  std::chrono::milliseconds call_timeout{0};  // --timeout-ms
  bool metrics = false;                       // --metrics: the server's built-in metrics
  bool interceptors = false;      // --interceptors: a no-op interceptor on each side (and --metrics)
  std::size_t connections = 100;  // heartbeats mode
  bool heartbeats = true;         // --no-heartbeats: the baseline of heartbeats mode
  // --heartbeat-interval/--heartbeat-timeout MS: 0 keeps the library's defaults.
  std::chrono::milliseconds heartbeat_interval{0}, heartbeat_timeout{0};
  client_options client;

  rdmarpc::transport::connection_options transport() const {
    rdmarpc::transport::connection_options o;
    o.polling = polling;
    if (adaptive_spin.count() > 0) o.adaptive_spin = adaptive_spin;
    if (adaptive_spin_max.count() > 0) o.adaptive_spin_max = adaptive_spin_max;
    return o;
  }
  // What a call costs with interceptors installed: one that does nothing, on each side.
  struct noop_server final : rdmarpc::server_interceptor {};
  struct noop_client final : rdmarpc::client_interceptor {};
  rdmarpc::server_options server() const {
    rdmarpc::server_options o;
    o.transport = transport();
    o.metrics = metrics || interceptors;
    if (interceptors) o.interceptors.push_back(std::make_shared<noop_server>());
    apply_heartbeats(o);
    return o;
  }
  rdmarpc::channel_options channel() const {
    rdmarpc::channel_options o;
    o.transport = transport();
    if (interceptors) o.interceptors.push_back(std::make_shared<noop_client>());
    apply_heartbeats(o);
    return o;
  }
  // --heartbeat-interval, --heartbeat-timeout, --no-heartbeats (e.g. for callgrind on a loaded
  // machine, where a 300 ms silence is not a dead peer).
  template <typename Options>
  void apply_heartbeats(Options& o) const {
    if (heartbeat_interval.count() > 0) o.heartbeat_interval = heartbeat_interval;
    if (heartbeat_timeout.count() > 0) o.heartbeat_timeout = heartbeat_timeout;
    if (!heartbeats) o.heartbeat_interval = std::chrono::steady_clock::duration::zero();
  }
  std::string mode_label() const {
    // A stream whose server writes with async_write only is its own point ("adaptive+async_write").
    const std::string writes = async_writes_only ? "+async_write" : "";
    switch (polling) {
      case rdmarpc::transport::cq_polling::busy: return "busy_poll" + writes;
      case rdmarpc::transport::cq_polling::adaptive: return "adaptive" + writes;
      case rdmarpc::transport::cq_polling::event: break;
    }
    return "event" + writes;
  }
};

// Both echo services; the bench serves the one --handler names.
struct echo_services {
  echo_service coroutine;
  callback_echo_service callback;
  rdmarpc::service& pick(const settings& s) {
    if (s.coroutine_handler) return coroutine;
    return callback;
  }
};

int serve(const settings& s) {
  asio::io_context io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);  // one thread runs it (README, Latency tips)
  echo_services services;
  rdmarpc::server server(io.get_executor(), s.server());
  server.add_service(services.pick(s));
  const auto bound = server.listen(s.uri);
  std::cerr << "rdmarpc_echo_bench: listening on " << bound.to_uri() << " (" << s.mode_label() << ")"
            << std::endl;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code, int) {
    server.async_shutdown(std::chrono::milliseconds(200), [&] { io.stop(); });
  });
  io.run();
  return 0;
}

// The client flags every mode that issues calls applies.
void apply_client_flags(echo_client& client, const settings& s) {
  client.async_writes_only = s.async_writes_only;
  client.caller_reply = s.caller_reply;
  client.reply_by_value = s.reply_by_value;
  client.call_timeout = s.call_timeout;
}

int run_client(const settings& s) {
  asio::io_context io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);  // one thread runs it (README, Latency tips)
  auto channel = rdmarpc::channel::create(io.get_executor(), s.uri, s.channel());
  echo_client client(io, channel, transport_of(s.uri), s.mode_label());
  apply_client_flags(client, s);
  const auto results = run_matrix(client, s.client);
  channel->close();
  io.restart();
  io.run_for(std::chrono::milliseconds(100));  // not poll(): busy-poll mode never runs out of work
  print_table(std::cout, results);
  return 0;
}

// A server on its own thread and io_context, and a client channel to it on the caller's.
class inproc_pair {
 public:
  explicit inproc_pair(const settings& s) : work_(server_io_.get_executor()) {
    server_.emplace(server_io_.get_executor(), s.server());
    server_->add_service(services_.pick(s));
    const rdmarpc::channel_options channel_options = s.channel();
    if (s.uri == "loopback") {
      rdmarpc::transport::loopback::loopback_options lo;
      lo.connection = s.transport();
      auto [server_end, client_end] = rdmarpc::transport::loopback::make_loopback_pair(
          server_io_.get_executor(), client_io_.get_executor(), lo);
      server_->serve(server_end);
      channel_ = rdmarpc::channel::create(client_end, channel_options);
    } else {
      const auto bound = server_->listen(s.uri);
      channel_ = rdmarpc::channel::create(client_io_.get_executor(), bound.to_uri(), channel_options);
    }
    thread_ = std::thread([this] { server_io_.run(); });
  }

  ~inproc_pair() {
    channel_->close();
    client_io_.restart();
    client_io_.run_for(std::chrono::milliseconds(100));  // not poll(): busy-poll mode never runs out
    std::promise<void> done;
    asio::post(server_io_,
               [&] { server_->async_shutdown(std::chrono::milliseconds(200), [&] { done.set_value(); }); });
    done.get_future().wait_for(std::chrono::seconds(5));
    work_.reset();
    server_io_.stop();
    thread_.join();
  }

  asio::io_context& client_io() { return client_io_; }
  const std::shared_ptr<rdmarpc::channel>& channel() const { return channel_; }

 private:
  asio::io_context server_io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};  // each run by one thread
  asio::io_context client_io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  echo_services services_;
  std::optional<rdmarpc::server> server_;
  std::shared_ptr<rdmarpc::channel> channel_;
  std::thread thread_;
};

int run_inproc(const settings& s) {
  std::vector<bench_result> results;
  {
    inproc_pair pair(s);
    echo_client client(pair.client_io(), pair.channel(), transport_of(s.uri), s.mode_label());
    apply_client_flags(client, s);
    results = run_matrix(client, s.client);
  }
  print_table(std::cout, results);
  return 0;
}

// What a unary echo puts on the wire per message (bench/compare runs perftest at that size too):
// the frame header and the serialized message; a call without metadata or deadline has no extras.
int run_frame_size(const settings& s) {
  for (const auto payload : s.client.payloads) {
    EchoRequest request;
    request.set_payload(std::string(payload, 'x'));
    EchoReply reply;
    reply.set_payload(request.payload());
    rdmarpc::frame::header request_header;
    rdmarpc::frame::header reply_header;
    reply_header.kind = rdmarpc::frame::kind::response;
    std::cout << payload << ' ' << rdmarpc::frame::header_size(request_header) + request.ByteSizeLong() << ' '
              << rdmarpc::frame::header_size(reply_header) + reply.ByteSizeLong() << '\n';
  }
  return 0;
}

// Runs `io` in 50 ms slices until done() or `limit` has passed; returns done().
template <typename Done>
bool run_until(asio::io_context& io, Done&& done, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < until) {
    io.restart();
    io.run_for(std::chrono::milliseconds(50));
  }
  return done();
}

int run_idle(const settings& s) {
  inproc_pair pair(s);
  echo_client client(pair.client_io(), pair.channel(), transport_of(s.uri), s.mode_label());
  apply_client_flags(client, s);
  // One call proves the pair is connected; then both sides wait for work that never comes, each
  // running its io_context as a real program would.
  run_matrix(client, one_call_options());
  // The steady state, as the heartbeats probe measures it: with heartbeats, from the first
  // exchange the channel saw (its ping answered, or the server's ping received). That one pays for what
  // happens once per process (the timers' first arming, first-time paths; under TCG their
  // translation), which in a 5 s window read as a tenth of a percent and more.
  if (s.heartbeats) {
    const auto exchanged = [&] {
      const auto st = pair.channel()->stats();
      return st.pongs_received + st.pings_received > 0;
    };
    if (!run_until(pair.client_io(), exchanged, std::chrono::seconds(5)))
      std::cerr << "rdmarpc_echo_bench: no heartbeat exchange within 5 s; measuring anyway\n";
  }
  // --no-heartbeats: the polling mode's own idle cost, without the default heartbeats' exchanges.
  const auto label = s.mode_label() + (s.heartbeats ? "" : "-no_heartbeats");
  const auto r = measure_idle("rdmarpc", transport_of(s.uri), label, [&] {
    pair.client_io().restart();
    pair.client_io().run_for(idle_duration(s.idle_seconds));
  });
  report_idle(r, s.client.json_path);
  return 0;
}

// heartbeats: the CPU cost of `connections` idle connections' heartbeats with the default
// settings (issue 11's target: at most 0.2 % of one core for 100). Server and channels live in
// this process, each side on one io_context thread; the process's CPU over --seconds is reported
// as a share of one core, once every connection had its first heartbeat exchange (the steady
// state). --no-heartbeats gives the same pairs' cost without them.
int run_heartbeats(const settings& s) {
  asio::io_context server_io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);  // as the echo modes run theirs
  asio::io_context client_io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  auto work = asio::make_work_guard(server_io);
  echo_services services;
  rdmarpc::server_options server_options;
  server_options.transport = s.transport();
  s.apply_heartbeats(server_options);
  rdmarpc::channel_options channel_options;
  channel_options.transport = s.transport();
  s.apply_heartbeats(channel_options);
  std::optional<rdmarpc::server> server;
  server.emplace(server_io.get_executor(), server_options);
  server->add_service(services.pick(s));
  const auto bound = server->listen(s.uri);
  std::thread server_thread([&] { server_io.run(); });
  std::vector<std::shared_ptr<rdmarpc::channel>> channels;
  for (std::size_t i = 0; i < s.connections; ++i) {
    channels.push_back(rdmarpc::channel::create(client_io.get_executor(), bound.to_uri(), channel_options));
    echo_client client(client_io, channels.back(), transport_of(s.uri), s.mode_label());
    run_matrix(client, one_call_options());  // connected
  }
  // The channels' heartbeat counters summed. Pings count from the measured window's start, like the
  // CPU: the first channels ping while the last ones connect (seconds over rdma under TCG, which
  // once read as a surplus of pings).
  struct heartbeat_totals {
    std::uint64_t pings = 0, client_pings = 0, timeouts = 0, connects = 0;
  };
  const auto totals = [&] {
    heartbeat_totals t;
    for (const auto& ch : channels) {
      const auto st = ch->stats();
      t.pings += st.pings_sent + st.pings_received;
      t.client_pings += st.pings_sent;
      t.timeouts += st.heartbeat_timeouts;
      t.connects += st.connects;
    }
    return t;
  };
  // A connection shares its heartbeats with the others to the same server grid after its own
  // first exchange (peer_liveness), within an interval or so of connecting: measure the steady
  // state after that, not the set-up.
  if (s.heartbeats) {
    const auto settled = [&] {
      for (const auto& ch : channels) {
        const auto st = ch->stats();
        if (st.pings_sent + st.pings_received == 0) return false;
      }
      return true;
    };
    run_until(client_io, settled, std::chrono::seconds(10));
  }
  const auto before = totals();
  // Each side's own thread CPU too: a client host with these connections pays the one, the
  // server host the other.
  const auto client0 = thread_cpu_time(pthread_self());
  const auto server0 = thread_cpu_time(server_thread.native_handle());
  auto r =
      measure_idle("rdmarpc", transport_of(s.uri),
                   (s.heartbeats ? "heartbeats-" : "no_heartbeats-") + std::to_string(s.connections), [&] {
                     client_io.restart();
                     client_io.run_for(idle_duration(s.idle_seconds));
                   });
  r.client_cpu_seconds = std::chrono::duration<double>(thread_cpu_time(pthread_self()) - client0).count();
  r.server_cpu_seconds =
      std::chrono::duration<double>(thread_cpu_time(server_thread.native_handle()) - server0).count();
  const auto after = totals();
  const auto pings = after.pings - before.pings, client_pings = after.client_pings - before.client_pings;
  const auto timeouts = after.timeouts, connects = after.connects;
  report_idle(r, s.client.json_path);
  std::cerr << "rdmarpc_echo_bench: " << s.connections << " idle connections over " << r.seconds
            << " s: " << 100.0 * r.cpu_seconds / r.seconds << " % of one core (client side "
            << 100.0 * r.client_cpu_seconds / r.seconds << " %, server side "
            << 100.0 * r.server_cpu_seconds / r.seconds << " %); " << pings << " pings, " << timeouts
            << " heartbeat timeouts, " << connects << " connects; the clients sent " << client_pings
            << " of the pings, the server " << pings - client_pings
            << " (both counted over the measured time)" << std::endl;
  for (auto& ch : channels) ch->close();
  channels.clear();
  client_io.restart();
  client_io.run_for(std::chrono::milliseconds(200));
  std::promise<void> done;
  asio::post(server_io,
             [&] { server->async_shutdown(std::chrono::milliseconds(200), [&] { done.set_value(); }); });
  done.get_future().wait_for(std::chrono::seconds(5));
  work.reset();
  server_io.stop();
  server_thread.join();
  return timeouts == 0 ? 0 : 1;
}

int run(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return 2;
  }
  settings s;
  s.mode = argv[1];
  arg_reader args(argc, argv, 2);
  while (!args.done()) {
    if (parse_client_flag(args, s.client)) continue;
    const auto f = args.flag();
    if (f == "--listen" || f == "--target") {
      s.uri = args.value();
    } else if (f == "--busy-poll") {
      s.polling = rdmarpc::transport::cq_polling::busy;
      args.skip();
    } else if (f == "--adaptive") {
      s.polling = rdmarpc::transport::cq_polling::adaptive;
      args.skip();
    } else if (f == "--adaptive-spin-us") {
      s.adaptive_spin = std::chrono::microseconds(std::stoll(args.value()));
    } else if (f == "--adaptive-spin-max-us") {
      s.adaptive_spin_max = std::chrono::microseconds(std::stoll(args.value()));
    } else if (f == "--handler") {
      const auto h = args.value();
      if (h != "callback" && h != "coroutine")
        throw std::invalid_argument("--handler is callback or coroutine");
      s.coroutine_handler = h == "coroutine";
    } else if (f == "--async-writes") {
      s.async_writes_only = true;
      args.skip();
    } else if (f == "--caller-reply") {
      s.caller_reply = true;
      args.skip();
    } else if (f == "--reply-by-value") {
      s.reply_by_value = true;
      args.skip();
    } else if (f == "--timeout-ms") {
      s.call_timeout = std::chrono::milliseconds(std::stoll(args.value()));
      if (s.call_timeout.count() <= 0) throw std::invalid_argument("--timeout-ms is a positive number");
    } else if (f == "--metrics") {
      s.metrics = true;
      args.skip();
    } else if (f == "--interceptors") {
      s.interceptors = true;
      args.skip();
    } else if (f == "--seconds") {
      s.idle_seconds = std::stod(args.value());
    } else if (f == "--connections") {
      s.connections = std::stoul(args.value());
    } else if (f == "--heartbeat-interval") {
      s.heartbeat_interval = std::chrono::milliseconds(std::stol(args.value()));
    } else if (f == "--heartbeat-timeout") {
      s.heartbeat_timeout = std::chrono::milliseconds(std::stol(args.value()));
    } else if (f == "--no-heartbeats") {
      s.heartbeats = false;
      args.skip();
    } else {
      std::cerr << "unknown flag " << f << "\n";
      usage();
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);  // the library's info logs would interleave with progress
  if (s.mode == "server") return serve(s);
  if (s.mode == "client") return run_client(s);
  if (s.mode == "inproc") return run_inproc(s);
  if (s.mode == "idle") return run_idle(s);
  if (s.mode == "heartbeats") return run_heartbeats(s);
  if (s.mode == "frame-size") return run_frame_size(s);
  usage();
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "rdmarpc_echo_bench: " << e.what() << "\n";
    // A stuck point leaves calls referencing its stack frame: leave without unwinding further.
    std::_Exit(1);
  }
}
