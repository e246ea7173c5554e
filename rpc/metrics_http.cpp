#include "rpc/metrics_http.hpp"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/system/system_error.hpp>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "log/log.hpp"
#include "rpc/scrape_coalescer.hpp"

namespace rdmarpc {
namespace {

namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

// "127.0.0.1:9464", "[::1]:9464", ":9464" (loopback) -> an endpoint; throws system_error(invalid_argument)
// otherwise.
tcp::endpoint parse_address(std::string_view address) {
  const auto bad = [&] {
    return boost::system::system_error(
        make_error_code(boost::system::errc::invalid_argument),
        "rdmarpc metrics_address \"" + std::string(address) + "\": expected host:port, e.g. 127.0.0.1:9464");
  };
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == address.size()) throw bad();
  std::string host(address.substr(0, colon));
  if (host.empty()) host = "127.0.0.1";  // ":9464": loopback unless told otherwise
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned port = 0;
  for (char c : address.substr(colon + 1)) {
    if (c < '0' || c > '9') throw bad();
    port = port * 10 + static_cast<unsigned>(c - '0');
    if (port > 65535) throw bad();
  }
  boost::system::error_code ec;
  const auto ip = boost::asio::ip::make_address(host, ec);
  if (ec) throw bad();
  return {ip, static_cast<unsigned short>(port)};
}

std::string to_string(const tcp::endpoint& ep) {
  const auto a = ep.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(ep.port());
}

// One scraper's connection: one request, one answer, then closed.
class scrape_session : public std::enable_shared_from_this<scrape_session> {
 public:
  // Asks for the page (on the endpoint's thread); the answer comes on that thread too.
  using fetcher = std::function<void(scrape_coalescer::answer)>;

  scrape_session(tcp::socket socket, std::shared_ptr<std::atomic<std::size_t>> active, fetcher fetch)
      : stream_(std::move(socket)), active_(std::move(active)), fetch_(std::move(fetch)) {
    parser_.header_limit(8 * 1024);
    parser_.body_limit(1024);
  }
  ~scrape_session() { active_->fetch_sub(1); }

  void close() {
    boost::system::error_code ignored;
    stream_.socket().close(ignored);
  }

  void start() {
    stream_.expires_after(metrics_http::kScrapeTimeout);
    http::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](boost::system::error_code ec, std::size_t) { self->on_read(ec); });
  }

 private:
  void on_read(boost::system::error_code ec) {
    if (ec) return;  // timed out, malformed or gone: dropped
    const auto& req = parser_.get();
    if (req.method() != http::verb::get) {
      return respond(http::status::method_not_allowed, "only GET /metrics is served\n", "GET");
    }
    if (req.target() != "/metrics") return respond(http::status::not_found, "only /metrics is served\n");
    // No timeout while the page is gathered: only RPC threads that never answer would hold the
    // session (and one of the kMaxScrapers slots) for ever.
    fetch_([self = shared_from_this()](const scrape_coalescer::page_ptr& page) {
      self->respond(http::status::ok, *page);
    });
  }

  void respond(http::status status, std::string body, std::string_view allow = {}) {
    res_.result(status);
    res_.version(11);
    res_.set(http::field::server, "rdmarpc");
    res_.set(http::field::content_type, status == http::status::ok
                                            ? "text/plain; version=0.0.4; charset=utf-8"
                                            : "text/plain; charset=utf-8");
    if (!allow.empty()) res_.set(http::field::allow, allow);
    res_.keep_alive(false);
    res_.body() = std::move(body);
    res_.prepare_payload();
    stream_.expires_after(metrics_http::kScrapeTimeout);
    http::async_write(stream_, res_, [self = shared_from_this()](boost::system::error_code, std::size_t) {
      boost::system::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    });
  }

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_{8 * 1024};
  http::request_parser<http::string_body> parser_;  // a small body is read (then refused 405)
  http::response<http::string_body> res_;
  std::shared_ptr<std::atomic<std::size_t>> active_;
  fetcher fetch_;
};

}  // namespace

class metrics_http::impl : public std::enable_shared_from_this<metrics_http::impl> {
 public:
  impl(std::string_view address, renderer render) : acceptor_(*io_), render_(std::move(render)) {
    const auto ep = parse_address(address);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    address_ = to_string(acceptor_.local_endpoint());
  }

  void start() {
    accept_next();
    thread_ = std::thread([io = io_] { io->run(); });
  }

  void stop() {
    // Scrapers in progress are dropped; run() returns once their handlers have run.
    boost::asio::post(*io_, [self = shared_from_this()] {
      boost::system::error_code ignored;
      self->acceptor_.close(ignored);
      self->stopped_ = true;  // a request read before this must not start a collection now
      self->retry_timer_.cancel();
      self->collect_timer_.cancel();
      self->coalescer_.clear();
      for (auto& weak : self->sessions_)
        if (auto s = weak.lock()) s->close();
      self->sessions_.clear();
    });
    guard_.reset();
    if (thread_.joinable()) thread_.join();
  }

  const std::string& address() const noexcept { return address_; }

 private:
  void accept_next() {
    acceptor_.async_accept([self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
      if (ec == boost::asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (ec) {
        // E.g. out of file descriptors: keep serving, but do not spin.
        self->retry_timer_.expires_after(std::chrono::milliseconds(50));
        self->retry_timer_.async_wait([self](boost::system::error_code wait) {
          if (!wait && self->acceptor_.is_open()) self->accept_next();
        });
        return;
      }
      if (self->active_->load() >= kMaxScrapers) {
        // Beyond the limit: closed at once, the others carry on.
        if (!self->limit_logged_) {
          self->limit_logged_ = true;
          rdmarpc::logger()->warn(
              "rdmarpc metrics endpoint {}: more than {} scrapers at once; closing the "
              "extra ones (logged once)",
              self->address_, kMaxScrapers);
        }
      } else {
        self->active_->fetch_add(1);
        auto session = std::make_shared<scrape_session>(
            std::move(socket), self->active_, [weak = self->weak_from_this()](scrape_coalescer::answer a) {
              if (auto owner = weak.lock()) owner->fetch_page(std::move(a));
            });
        std::erase_if(self->sessions_, [](const auto& w) { return w.expired(); });
        self->sessions_.push_back(session);
        session->start();
      }
      self->accept_next();
    });
  }

  // A scrape's page, on the endpoint's thread: from the next collection to start (see
  // scrape_coalescer: collections are shared and at most one per kMinCollectionInterval).
  void fetch_page(scrape_coalescer::answer a) {
    if (stopped_) return;  // dropped: the session closes with the endpoint
    act(coalescer_.request(clock::now(), std::move(a)));
  }

  void act(const scrape_coalescer::next_step& step) {
    if (stopped_) return;
    if (step.collect_now) return collect();
    if (!step.wake_at || collect_timer_armed_) return;
    collect_timer_armed_ = true;
    collect_timer_.expires_at(*step.wake_at);
    collect_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      self->collect_timer_armed_ = false;
      if (!ec) self->act(self->coalescer_.wake(clock::now()));
    });
  }

  // Gathered on the connections' threads; formatted here. The callback holds the io_context (the
  // endpoint may be gone by then: the page is dropped).
  void collect() {
    render_([io = io_, weak = weak_from_this()](page p) {
      boost::asio::post(*io, [weak, p = std::move(p)] {
        if (auto self = weak.lock())
          self->act(self->coalescer_.collected(clock::now(), std::make_shared<const std::string>(p())));
      });
    });
  }

  using clock = scrape_coalescer::clock;

  // Shared with the render callbacks, which may outlive us by a moment.
  std::shared_ptr<boost::asio::io_context> io_ = std::make_shared<boost::asio::io_context>(1);
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_{
      io_->get_executor()};
  tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_{*io_};         // after a failed accept
  scrape_coalescer coalescer_{kMinCollectionInterval};  // on the io thread
  boost::asio::steady_timer collect_timer_{*io_};       // the coalescer's next collection
  bool collect_timer_armed_ = false;
  bool stopped_ = false;  // on the io thread: set by stop()
  renderer render_;
  std::string address_;
  std::shared_ptr<std::atomic<std::size_t>> active_ = std::make_shared<std::atomic<std::size_t>>(0);
  bool limit_logged_ = false;                            // on the io thread
  std::vector<std::weak_ptr<scrape_session>> sessions_;  // on the io thread: closed by stop()
  std::thread thread_;
};

metrics_http::metrics_http(std::string_view address, renderer render)
    : impl_(std::make_shared<impl>(address, std::move(render))) {
  impl_->start();
  rdmarpc::logger()->info("rdmarpc server: metrics on http://{}/metrics", impl_->address());
}

metrics_http::~metrics_http() {
  impl_->stop();
}

const std::string& metrics_http::address() const noexcept {
  return impl_->address();
}

}  // namespace rdmarpc
