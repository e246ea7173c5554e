// transport_floor: rdmarpc's transport alone (no rpc: no frame, no protobuf, no call table) carrying
// a request/reply round trip of --payload bytes between two processes, 1 in flight. The server
// copies each message it receives into a reservation and commits it; the client times each round
// trip from just before it reserves room for the request to the reply's delivery. Next to perftest and the
// rpc echo in the same VM, it splits rdmarpc's distance from raw verbs into the transport's share (reactor,
// rings, credits, Asio) and the rpc layer's.
//
//   transport_floor server --listen URI [--busy-poll|--adaptive]
//   transport_floor client --target URI [--busy-poll|--adaptive] [--payload BYTES] [--calls N]
//                          [--warmup-calls N] [--json PATH] [--quiet]
//   transport_floor inproc --listen URI|loopback [client flags]   both ends in one process
// The client prints one line: p50, p90, p99 round trip in µs, and appends a JSON object with --json.
// inproc is for callgrind (bench/compare): the transport's instructions per round trip, next to the
// rpc echo's (it accepts bench/compare's --concurrency 1 and --warmup, ignored).
// The server says "listening" once it is, serves one connection, then exits. Nothing here is a
// test: bench/compare runs it in the Soft-RoCE VM's rounds (bench/vm/guest_bench.sh).

#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "bench/common/latency_histogram.hpp"
#include "transport/connect.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace {

namespace asio = boost::asio;
namespace transport = rdmarpc::transport;
using clock_type = std::chrono::steady_clock;

struct settings {
  std::string role;
  std::string uri;
  transport::cq_polling polling = transport::cq_polling::event;
  std::size_t payload = 76;  // a 64 B echo's frame on the wire (rdmarpc_echo_bench frame-size)
  std::uint64_t calls = 20000;
  std::uint64_t warmup_calls = 2000;
  std::string json;
  bool quiet = false;  // no result line (callgrind runs)
};

std::string_view mode_name(transport::cq_polling p) {
  switch (p) {
    case transport::cq_polling::busy: return "busy_poll";
    case transport::cq_polling::adaptive: return "adaptive";
    case transport::cq_polling::event: break;
  }
  return "event";
}

// Sends `bytes` now. With one message in flight each way there is always room: the send ring
// holds 128 messages and reclaims them as signalled sends complete, so would_block here would be
// a transport bug, and the run fails rather than wait.
void send_copy(transport::connection& c, std::span<const std::byte> bytes) {
  boost::system::error_code ec;
  auto r = c.try_reserve(bytes.size(), ec);
  if (!r) throw std::runtime_error("transport_floor: no room to send: " + ec.message());
  std::memcpy(r.data().data(), bytes.data(), bytes.size());
  r.commit();
}

class echo_server final : public transport::connection_handler {
 public:
  explicit echo_server(std::shared_ptr<transport::connection> c) : connection_(std::move(c)) {}
  void on_message(transport::received_message message) override { send_copy(*connection_, message.bytes()); }
  void on_close(const boost::system::error_code&) override { connection_.reset(); }

 private:
  std::shared_ptr<transport::connection> connection_;
};

class echo_client final : public transport::connection_handler {
 public:
  echo_client(std::shared_ptr<transport::connection> c, const settings& s)
      : connection_(std::move(c)),
        message_(s.payload, std::byte{0x5a}),
        warmup_(s.warmup_calls),
        calls_(s.calls) {}
  void send_next() {
    sent_at_ = clock_type::now();
    send_copy(*connection_, message_);
  }
  void on_message(transport::received_message message) override {
    const auto now = clock_type::now();
    if (message.bytes().size() != message_.size())
      throw std::runtime_error("transport_floor: reply size differs");
    message.release();
    if (warmup_ > 0) {
      --warmup_;
    } else {
      rtts_.record(static_cast<std::uint64_t>(std::chrono::nanoseconds(now - sent_at_).count()));
    }
    if (rtts_.count() < calls_) return send_next();
    connection_->close();
  }
  void on_close(const boost::system::error_code& reason) override {
    end_reason_ = reason;
    connection_.reset();
    if (on_end) on_end();
  }
  // Runs once the connection has ended (the calls done, or not).
  std::function<void()> on_end;
  const rdmarpc::bench::latency_histogram& rtts() const { return rtts_; }
  const boost::system::error_code& end_reason() const { return end_reason_; }

 private:
  std::shared_ptr<transport::connection> connection_;
  std::vector<std::byte> message_;
  std::uint64_t warmup_;
  std::uint64_t calls_;
  clock_type::time_point sent_at_{};
  rdmarpc::bench::latency_histogram rtts_;  // nanoseconds
  boost::system::error_code end_reason_;
};

transport::connection_options options_for(const settings& s) {
  transport::connection_options o;
  o.polling = s.polling;
  return o;
}

// Accepts one connection on `io` and echoes on it; the listener closes after that one.
std::unique_ptr<transport::listener> serve_one(asio::io_context& io, const settings& s) {
  auto listener =
      transport::make_listener(io.get_executor(), transport::parse_endpoint(s.uri).value(), options_for(s));
  listener->async_accept(io.get_executor(), [l = listener.get()](boost::system::error_code ec,
                                                                 std::shared_ptr<transport::connection> c) {
    if (ec) throw boost::system::system_error(ec, "accept");
    l->close();
    c->start(std::make_shared<echo_server>(c));
  });
  return listener;
}

void run_server(const settings& s) {
  asio::io_context io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  const auto listener = serve_one(io, s);
  // What bench/vm/guest_bench.sh waits for before it starts the client.
  std::cout << "transport_floor: listening on " << listener->local_endpoint().to_uri() << std::endl;
  io.run();
}

// Starts the client's calls on `c` (once connected), on c's executor.
std::shared_ptr<echo_client> start_client(const std::shared_ptr<transport::connection>& c,
                                          const settings& s) {
  auto client = std::make_shared<echo_client>(c, s);
  c->start(client);
  client->send_next();
  return client;
}

// Connects to `uri` on `io` and runs the calls; returns the client once io has run out of work.
std::shared_ptr<echo_client> connect_and_run(asio::io_context& io, const std::string& uri,
                                             const settings& s) {
  std::shared_ptr<echo_client> client;
  transport::async_connect(io.get_executor(), transport::parse_endpoint(uri).value(), options_for(s),
                           [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             if (ec) throw boost::system::system_error(ec, "connect");
                             client = start_client(c, s);
                           });
  io.run();
  return client;
}

void report(const echo_client& client, const settings& s) {
  const auto& rtts = client.rtts();
  if (rtts.count() < s.calls) {
    throw std::runtime_error("transport_floor: the connection ended after " + std::to_string(rtts.count()) +
                             " of " + std::to_string(s.calls) +
                             " round trips: " + client.end_reason().message());
  }
  if (s.quiet) return;
  const auto us = [&](double percent) { return static_cast<double>(rtts.percentile(percent)) / 1e3; };
  const double p50 = us(50), p90 = us(90), p99 = us(99);
  std::cout << "transport_floor " << s.uri << " " << mode_name(s.polling) << " " << s.payload << " B: p50 "
            << p50 << " us, p90 " << p90 << " us, p99 " << p99 << " us (" << rtts.count()
            << " round trips)\n";
  if (s.json.empty()) return;
  std::ofstream out(s.json, std::ios::app);
  const std::string_view transport = s.uri.starts_with("rdma:")  ? "rdma"
                                     : s.uri.starts_with("tcp:") ? "tcp"
                                                                 : "loopback";
  out << R"({"kind": "transport_floor", "transport": ")" << transport << R"(", "mode": ")"
      << mode_name(s.polling) << R"(", "payload": )" << s.payload << R"(, "calls": )" << rtts.count()
      << R"(, "p50_us": )" << p50 << R"(, "p90_us": )" << p90 << R"(, "p99_us": )" << p99 << "}\n";
  if (!out) throw std::runtime_error("transport_floor: cannot write " + s.json);
}

// Both ends in this process, the server's on a thread of its own (callgrind counts both):
// over a listener for rdma:// and tcp://, or a loopback pair.
void run_inproc(const settings& s) {
  asio::io_context server_io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  asio::io_context client_io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  std::shared_ptr<echo_client> client;
  if (s.uri == "loopback") {
    auto [server_end, client_end] =
        transport::loopback::make_loopback_pair(server_io.get_executor(), client_io.get_executor());
    server_end->start(std::make_shared<echo_server>(server_end));
    // Neither io_context has work of its own while a message is on its way to it (a loopback end
    // posts to its peer's): both are kept running until the client is done, whose close then ends
    // the server's end too.
    auto work = asio::make_work_guard(server_io);
    std::thread server([&] { server_io.run(); });
    auto client_work = asio::make_work_guard(client_io);
    client = start_client(client_end, s);
    client->on_end = [&] { client_work.reset(); };
    client_end.reset();
    server_end.reset();
    client_io.run();
    work.reset();
    server.join();
  } else {
    const auto listener = serve_one(server_io, s);
    const std::string bound = listener->local_endpoint().to_uri();
    std::thread server([&] { server_io.run(); });
    try {
      client = connect_and_run(client_io, bound, s);
    } catch (...) {
      server_io.stop();  // (its accept may still wait)
      server.join();
      throw;
    }
    server.join();
  }
  report(*client, s);
}

settings parse(int argc, char** argv) {
  settings s;
  if (argc < 2) throw std::invalid_argument("usage: transport_floor server|client ...");
  s.role = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "--listen" || a == "--target") {
      s.uri = value();
    } else if (a == "--busy-poll") {
      s.polling = transport::cq_polling::busy;
    } else if (a == "--adaptive") {
      s.polling = transport::cq_polling::adaptive;
    } else if (a == "--payload") {
      s.payload = std::stoul(value());
    } else if (a == "--calls") {
      s.calls = std::stoull(value());
    } else if (a == "--warmup-calls") {
      s.warmup_calls = std::stoull(value());
    } else if (a == "--json") {
      s.json = value();
    } else if (a == "--quiet") {
      s.quiet = true;
    } else if (a == "--concurrency") {  // bench/compare's callgrind runs pass these
      if (value() != "1") throw std::invalid_argument("--concurrency: 1 call in flight only");
    } else if (a == "--warmup") {
      value();  // (seconds: warm-up here is --warmup-calls)
    } else {
      throw std::invalid_argument("unknown argument " + std::string(a));
    }
  }
  if (s.uri.empty() || (s.role != "server" && s.role != "client" && s.role != "inproc") || s.payload == 0 ||
      s.calls == 0 || (s.uri == "loopback" && s.role != "inproc"))
    throw std::invalid_argument(
        "usage: transport_floor server --listen URI | client --target URI | inproc --listen URI|loopback "
        "...");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    spdlog::set_level(spdlog::level::warn);
    const settings s = parse(argc, argv);
    if (s.role == "server") {
      run_server(s);
    } else if (s.role == "inproc") {
      run_inproc(s);
    } else {
      asio::io_context io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
      report(*connect_and_run(io, s.uri, s), s);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "transport_floor: " << e.what() << "\n";
    return 1;
  }
}
