#pragma once
// metrics_http: the HTTP/1.1 endpoint a server serves its Prometheus metrics on
// (server_options::metrics_address). GET /metrics only (other paths 404, other methods, HEAD
// too, 405); one request per connection; at most kMaxScrapers connections at once (more are
// closed); each must send its request and read the answer within kScrapeTimeout. It runs on a thread and
// io_context of its own, and scrapes share collections (rpc/scrape_coalescer.hpp): at most one per
// kMinCollectionInterval, so a slow or hostile scraper costs that thread, and the RPC threads at most one
// small task per connection per interval. Layer: rpc. Threading: construct and destroy on any one thread;
// render runs on other threads.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace rdmarpc {

class metrics_http {
 public:
  static constexpr std::size_t kMaxScrapers = 16;
  static constexpr std::chrono::seconds kScrapeTimeout{10};
  // Collections of the page (a task on every connection's thread) start at most this often. A
  // scrape waits for the next collection to start and finish (at most max(this, C) + C, C being
  // how long a collection takes): its page is never older than its request.
  static constexpr std::chrono::milliseconds kMinCollectionInterval{100};

  // Gathers what the page shows and hands `done` (from any thread, exactly once) a function that
  // formats it, which the endpoint runs on its own thread: formatting costs no RPC thread.
  using page = std::function<std::string()>;
  using renderer = std::function<void(std::function<void(page)> done)>;

  // Listens on `address` ("127.0.0.1:9464", "[::1]:0", "0.0.0.0:9464"; ":9464" is 127.0.0.1:9464;
  // port 0 picks one). Throws
  // boost::system::system_error when the address is malformed or cannot be bound.
  metrics_http(std::string_view address, renderer render);
  ~metrics_http();  // stops listening, closes scrapers, joins the thread
  metrics_http(const metrics_http&) = delete;
  metrics_http& operator=(const metrics_http&) = delete;

  // The bound address, "127.0.0.1:9464" (the real port when 0 was asked for).
  const std::string& address() const noexcept;

 private:
  class impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace rdmarpc
