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
#include <exception>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

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
  bool quiet = false;  // no result line and no JSON (callgrind runs)
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
  if (!r) throw std::runtime_error("no room to send: " + ec.message());
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
      throw std::runtime_error("the reply's size differs from the request's");
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

// Runs the calls on `io` over the connection `connect` hands to its callback (at once, or once
// connected) until that connection ends; returns the client. `io` is kept running meanwhile: a
// loopback end has no work of its own while a message is on its way to it.
template <typename Connect>
std::shared_ptr<echo_client> run_calls(asio::io_context& io, const settings& s, Connect&& connect) {
  auto work = asio::make_work_guard(io);
  std::shared_ptr<echo_client> client;
  connect([&](const std::shared_ptr<transport::connection>& c) {
    client = std::make_shared<echo_client>(c, s);
    client->on_end = [&work] { work.reset(); };
    c->start(client);
    client->send_next();
  });
  io.run();
  if (!client) throw std::runtime_error("no connection was made");
  client->on_end = nullptr;
  return client;
}

// Connects to `uri` on `io`, then the callback (run_calls).
auto connect_to(asio::io_context& io, const std::string& uri, const settings& s) {
  return [&io, uri, &s](auto start) {
    transport::async_connect(io.get_executor(), transport::parse_endpoint(uri).value(), options_for(s),
                             [start](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                               if (ec) throw boost::system::system_error(ec, "connect");
                               start(c);
                             });
  };
}

// The server's io_context on a thread of its own. What the server throws comes out of join(), and
// `on_failure` runs (on that thread) so the client stops waiting for it.
class server_thread {
 public:
  server_thread(asio::io_context& io, std::function<void()> on_failure)
      : io_(io), on_failure_(std::move(on_failure)), thread_([this] { run(); }) {}
  ~server_thread() {
    if (!thread_.joinable()) return;
    io_.stop();
    thread_.join();
  }
  server_thread(const server_thread&) = delete;
  server_thread& operator=(const server_thread&) = delete;

  // Waits up to `limit` for the server to run out of work (its end closed), then stops it.
  void join(std::chrono::seconds limit) {
    if (finished_.wait_for(limit) == std::future_status::timeout) io_.stop();
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run() {
    try {
      io_.run();
    } catch (...) {
      error_ = std::current_exception();
      on_failure_();
    }
    done_.set_value();
  }

  asio::io_context& io_;
  std::function<void()> on_failure_;
  std::exception_ptr error_;
  std::promise<void> done_;
  std::future<void> finished_ = done_.get_future();
  std::thread thread_;  // last: it starts running at once
};

void report(const echo_client& client, const settings& s) {
  const auto& rtts = client.rtts();
  if (rtts.count() < s.calls) {
    throw std::runtime_error("the connection ended after " + std::to_string(rtts.count()) + " of " +
                             std::to_string(s.calls) + " round trips: " + client.end_reason().message());
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
  out.close();  // (a failed write may show only here)
  if (!out) throw std::runtime_error("cannot write " + s.json);
}

// Both ends in this process, the server's on a thread of its own (callgrind counts both):
// over a listener for rdma:// and tcp://, or a loopback pair.
void run_inproc(const settings& s) {
  asio::io_context server_io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  asio::io_context client_io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  auto server_work = asio::make_work_guard(server_io);  // as run_calls keeps the client's
  std::shared_ptr<transport::connection> client_end;
  std::unique_ptr<transport::listener> listener;
  if (s.uri == "loopback") {
    auto [server_end, c] =
        transport::loopback::make_loopback_pair(server_io.get_executor(), client_io.get_executor());
    server_end->start(std::make_shared<echo_server>(server_end));
    client_end = std::move(c);
  } else {
    listener = serve_one(server_io, s);
  }
  server_thread server(server_io, [&client_io] { client_io.stop(); });
  std::shared_ptr<echo_client> client;
  if (client_end) {
    client = run_calls(client_io, s, [&](auto start) { start(std::exchange(client_end, nullptr)); });
  } else {
    client = run_calls(client_io, s, connect_to(client_io, listener->local_endpoint().to_uri(), s));
  }
  // The client's close ends the server's end: its io_context then runs out of work.
  server_work.reset();
  server.join(std::chrono::seconds(10));
  report(*client, s);
}

settings parse(int argc, char** argv) {
  settings s;
  if (argc < 2) throw std::invalid_argument("usage: transport_floor server|client|inproc ...");
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
      report(*run_calls(io, s, connect_to(io, s.uri, s)), s);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "transport_floor: " << e.what() << "\n";
    return 1;
  }
}
