// transport_floor: rdmarpc's transport alone (no rpc: no frame, no protobuf, no call table) carrying
// a request/reply round trip of --payload bytes between two processes, 1 in flight. The server
// copies each message it receives into a reservation and commits it; the client times each round
// trip from its commit to the reply's delivery. Next to perftest and the rpc echo in the same VM,
// it splits rdmarpc's distance from raw verbs into the transport's share (reactor, rings, credits,
// Asio) and the rpc layer's.
//
//   transport_floor server --listen URI [--busy-poll|--adaptive]
//   transport_floor client --target URI [--busy-poll|--adaptive] [--payload BYTES] [--calls N]
//                          [--warmup-calls N] [--json PATH]
// The client prints one line: p50, p90, p99 round trip in µs, and appends a JSON object with --json.
// The server says "listening" once it is, serves one connection, then exits. Nothing here is a
// test: bench/compare runs it in the Soft-RoCE VM's rounds (bench/vm/guest_bench.sh).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "transport/connect.hpp"

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
};

std::string_view mode_name(transport::cq_polling p) {
  switch (p) {
    case transport::cq_polling::busy: return "busy_poll";
    case transport::cq_polling::adaptive: return "adaptive";
    case transport::cq_polling::event: break;
  }
  return "event";
}

// Sends `bytes` now; the bench keeps one message in flight, so room is always there.
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
        calls_(s.calls) {
    rtts_.reserve(calls_);
  }
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
      rtts_.push_back(std::chrono::duration<double, std::micro>(now - sent_at_).count());
    }
    if (rtts_.size() < calls_) return send_next();
    connection_->close();
  }
  void on_close(const boost::system::error_code&) override { connection_.reset(); }
  std::vector<double>& rtts() { return rtts_; }

 private:
  std::shared_ptr<transport::connection> connection_;
  std::vector<std::byte> message_;
  std::uint64_t warmup_;
  std::uint64_t calls_;
  clock_type::time_point sent_at_{};
  std::vector<double> rtts_;
};

transport::connection_options options_for(const settings& s) {
  transport::connection_options o;
  o.polling = s.polling;
  return o;
}

void run_server(const settings& s) {
  asio::io_context io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  const auto ep = transport::parse_endpoint(s.uri).value();
  auto listener = transport::make_listener(io.get_executor(), ep, options_for(s));
  listener->async_accept(io.get_executor(),
                         [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                           if (ec) throw boost::system::system_error(ec, "accept");
                           listener->close();
                           c->start(std::make_shared<echo_server>(c));
                         });
  // What bench/vm/guest_bench.sh waits for before it starts the client.
  std::cout << "transport_floor: listening on " << listener->local_endpoint().to_uri() << std::endl;
  io.run();
}

double percentile(std::vector<double>& sorted, double q) {
  return sorted[std::min(sorted.size() - 1,
                         static_cast<std::size_t>(q * static_cast<double>(sorted.size())))];
}

void run_client(const settings& s) {
  asio::io_context io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  const auto ep = transport::parse_endpoint(s.uri).value();
  std::shared_ptr<echo_client> client;
  transport::async_connect(io.get_executor(), ep, options_for(s),
                           [&](boost::system::error_code ec, std::shared_ptr<transport::connection> c) {
                             if (ec) throw boost::system::system_error(ec, "connect");
                             client = std::make_shared<echo_client>(c, s);
                             c->start(client);
                             client->send_next();
                           });
  io.run();
  auto& rtts = client->rtts();
  if (rtts.size() < s.calls) throw std::runtime_error("transport_floor: the connection ended early");
  std::sort(rtts.begin(), rtts.end());
  const double p50 = percentile(rtts, 0.5), p90 = percentile(rtts, 0.9), p99 = percentile(rtts, 0.99);
  std::cout << "transport_floor " << ep.to_uri() << " " << mode_name(s.polling) << " " << s.payload
            << " B: p50 " << p50 << " us, p90 " << p90 << " us, p99 " << p99 << " us (" << rtts.size()
            << " round trips)\n";
  if (!s.json.empty()) {
    std::ofstream out(s.json, std::ios::app);
    out << R"({"kind": "transport_floor", "transport": ")"
        << (ep.scheme == transport::scheme::rdma ? "rdma" : "tcp") << R"(", "mode": ")"
        << mode_name(s.polling) << R"(", "payload": )" << s.payload << R"(, "calls": )" << rtts.size()
        << R"(, "p50_us": )" << p50 << R"(, "p90_us": )" << p90 << R"(, "p99_us": )" << p99 << "}\n";
  }
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
    } else {
      throw std::invalid_argument("unknown argument " + std::string(a));
    }
  }
  if (s.uri.empty() || (s.role != "server" && s.role != "client") || s.payload == 0 || s.calls == 0)
    throw std::invalid_argument("usage: transport_floor server --listen URI | client --target URI ...");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    spdlog::set_level(spdlog::level::warn);
    const settings s = parse(argc, argv);
    if (s.role == "server") {
      run_server(s);
    } else {
      run_client(s);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "transport_floor: " << e.what() << "\n";
    return 1;
  }
}
