// tcp_floor: the least user-space work a request/reply round trip (64 B each way, 1 in flight) over
// a loopback tcp socket takes between two threads of one process, with no rpc at all: the sockets
// driven by Asio as rdmarpc's tcp transport drives them (an io_context per thread with the hint
// UNSAFE_IO, as rdmarpc_echo_bench runs its own; async_wait for readability, then recv and send
// straight on the descriptor), or by a bare epoll loop. Run
// under callgrind by bench/compare next to rdmarpc's tcp echo: what the event loop alone costs per
// call, and so how much of rdmarpc's count is its own work.
//
//   tcp_floor [--reactor asio|epoll] [--payload BYTES] [--calls N] [--warmup-calls N] [--quiet]
// Nothing is timed: warm-up calls run like the rest (bench/compare differences two runs). Accepts
// bench/compare's --concurrency (1 only) and --warmup (ignored) too.

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "transport/tcp/raw_socket_io.hpp"

namespace {

namespace asio = boost::asio;
using socket_type = asio::basic_stream_socket<asio::ip::tcp, asio::io_context::executor_type>;

constexpr std::size_t kMaxPayload = 64 * 1024;

struct settings {
  std::string reactor = "asio";
  std::size_t payload = 64;
  std::uint64_t calls = 10000;
  std::uint64_t warmup_calls = 200;
  bool quiet = false;
};

[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// One recv of what is there into `buf` from `have` on (with one message in flight it takes the whole
// message, as rdmarpc's transport reads once per readiness); true once `want` bytes are in. False
// with `closed` set at the peer's end of stream; false otherwise (a part, or nothing yet).
bool read_once(int fd, std::vector<std::byte>& buf, std::size_t& have, std::size_t want, bool& closed) {
  for (;;) {
    const ssize_t n = rdmarpc::transport::tcp::raw_recv(fd, buf.data() + have, buf.size() - have);
    if (n > 0) {
      have += static_cast<std::size_t>(n);
      return have >= want;
    }
    if (n == 0) {
      closed = true;
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    fail("recv");
  }
}

void send_message(int fd, const std::vector<std::byte>& buf, std::size_t size) {
  std::size_t sent = 0;
  while (sent < size) {
    const ssize_t n = rdmarpc::transport::tcp::raw_send(fd, buf.data() + sent, size - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      fail("send");  // (a message of at most kMaxPayload into an idle loopback socket never blocks)
    }
  }
}

// One end of the exchange: the server echoes each message; the client sends `total` requests, one
// after another reply, then shuts its side down (the server's read sees the end and stops).
struct side {
  int fd;
  std::size_t payload;
  std::uint64_t total;  // requests to send (client); 0 for the server
  std::vector<std::byte> buf = std::vector<std::byte>(payload * 2);
  std::size_t have = 0;
  std::uint64_t done = 0;

  // A whole message arrived: answer it, or send the next request. False when the exchange is over.
  bool on_message() {
    have = 0;
    if (total == 0) {
      send_message(fd, buf, payload);
      return true;
    }
    if (++done == total) {
      ::shutdown(fd, SHUT_WR);
      return false;
    }
    send_message(fd, buf, payload);
    return true;
  }
};

// Asio: readability, then one recv on the descriptor (as rdmarpc's tcp_connection does).
void arm(socket_type& socket, side& end) {
  socket.async_wait(socket_type::wait_read, [&socket, &end](boost::system::error_code ec) {
    if (ec) throw std::system_error(ec, "async_wait");
    bool closed = false;
    if (read_once(end.fd, end.buf, end.have, end.payload, closed) && !end.on_message()) return;
    if (!closed) arm(socket, end);
  });
}

// Runs the server's side on its own thread and the client's here. A failure on either side ends
// the exchange (both descriptors shut down, so the other side's read sees the end) and is rethrown
// here once the thread is joined.
template <typename ServerSide, typename ClientSide>
void exchange(int server_fd, int client_fd, ServerSide&& serve, ClientSide&& run_client) {
  std::exception_ptr server_error;
  std::thread server_thread([&] {
    try {
      serve();
    } catch (...) {
      server_error = std::current_exception();
      ::shutdown(server_fd, SHUT_RDWR);
    }
  });
  std::exception_ptr client_error;
  try {
    run_client();
  } catch (...) {
    client_error = std::current_exception();
    ::shutdown(client_fd, SHUT_RDWR);
    ::shutdown(server_fd, SHUT_RDWR);
  }
  server_thread.join();
  if (client_error) std::rethrow_exception(client_error);
  if (server_error) std::rethrow_exception(server_error);
}

void run_asio(const settings& s, std::uint64_t total) {
  // Each run by one thread, as the README recommends (Latency tips) and rdmarpc_echo_bench does.
  asio::io_context server_io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  asio::io_context client_io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  asio::basic_socket_acceptor<asio::ip::tcp, asio::io_context::executor_type> acceptor(
      server_io.get_executor(), asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  socket_type client(client_io.get_executor());
  client.connect(acceptor.local_endpoint());
  socket_type server = acceptor.accept();
  for (socket_type* sock : {&client, &server}) {
    sock->set_option(asio::ip::tcp::no_delay(true));
    sock->non_blocking(true);
  }
  side server_side{server.native_handle(), s.payload, 0};
  side client_side{client.native_handle(), s.payload, total};
  arm(server, server_side);
  arm(client, client_side);
  exchange(
      server_side.fd, client_side.fd, [&] { server_io.run(); },
      [&] {
        send_message(client_side.fd, client_side.buf, s.payload);
        client_io.run();
      });
  if (client_side.done != total) throw std::runtime_error("asio: the exchange ended early");
}

// A bare epoll loop on one descriptor until the exchange is over: a wait, one recv, the answer.
void epoll_loop(side& end) {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) fail("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered: a message read in part wakes the next wait again
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, end.fd, &ev) != 0) fail("epoll_ctl");
  bool closed = false;
  for (bool more = true; more && !closed;) {
    epoll_event got{};
    if (::epoll_wait(ep, &got, 1, -1) < 0 && errno != EINTR) fail("epoll_wait");
    if (read_once(end.fd, end.buf, end.have, end.payload, closed)) more = end.on_message();
  }
  ::close(ep);
}

void run_epoll(const settings& s, std::uint64_t total) {
  asio::io_context io(1);  // only to make the connected pair
  asio::ip::tcp::acceptor acceptor(io, asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  asio::ip::tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  asio::ip::tcp::socket server = acceptor.accept();
  for (asio::ip::tcp::socket* sock : {&client, &server}) {
    sock->set_option(asio::ip::tcp::no_delay(true));
    sock->non_blocking(true);
  }
  side server_side{server.native_handle(), s.payload, 0};
  side client_side{client.native_handle(), s.payload, total};
  exchange(
      server_side.fd, client_side.fd, [&] { epoll_loop(server_side); },
      [&] {
        send_message(client_side.fd, client_side.buf, s.payload);
        epoll_loop(client_side);
      });
  if (client_side.done != total) throw std::runtime_error("epoll: the exchange ended early");
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view f = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(std::string(f) + " needs a value");
      return argv[++i];
    };
    const auto number = [&]() -> std::uint64_t {
      const std::string v = value();
      std::size_t used = 0;
      std::uint64_t n = 0;
      try {
        n = v.empty() || v[0] == '-' ? 0 : std::stoull(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != v.size()) throw std::invalid_argument(std::string(f) + ": not a number: " + v);
      return n;
    };
    if (f == "--reactor") {
      s.reactor = value();
    } else if (f == "--payload") {
      s.payload = number();
    } else if (f == "--calls") {
      s.calls = number();
    } else if (f == "--warmup-calls") {
      s.warmup_calls = number();
    } else if (f == "--quiet") {
      s.quiet = true;
    } else if (f == "--concurrency") {
      if (value() != "1") throw std::invalid_argument("--concurrency: only 1");
    } else if (f == "--warmup") {
      (void)value();
    } else {
      throw std::invalid_argument("unknown flag " + std::string(f));
    }
  }
  if (s.reactor != "asio" && s.reactor != "epoll") throw std::invalid_argument("--reactor asio|epoll");
  if (s.calls == 0) throw std::invalid_argument("--calls must be > 0");
  // Larger would not fit an idle socket's buffer at once, which the non-blocking send relies on.
  if (s.payload == 0 || s.payload > kMaxPayload) throw std::invalid_argument("--payload: 1 to 65536 bytes");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const settings s = parse(argc, argv);
    const std::uint64_t total =
        s.warmup_calls + s.calls;  // the same path for all: callgrind differences runs
    if (s.reactor == "asio") {
      run_asio(s, total);
    } else {
      run_epoll(s, total);
    }
    if (!s.quiet)
      std::cout << "tcp_floor " << s.reactor << ": " << total << " round trips of " << s.payload << " B\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tcp_floor: " << e.what() << "\n";
    return 1;
  }
}
