// The metrics endpoint's sharing of collections between scrapes, driven by hand with made-up
// times: every transition of rpc/scrape_coalescer.hpp, no I/O and no clock.
#include "rpc/scrape_coalescer.hpp"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

using rdmarpc::scrape_coalescer;
using namespace std::chrono_literals;

namespace {

const scrape_coalescer::clock::time_point t0{std::chrono::seconds(1000)};

scrape_coalescer::page_ptr page(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

// Records the pages a scrape was answered with.
struct scrape {
  std::vector<std::string> answers;
  scrape_coalescer::answer callback() {
    return [this](const scrape_coalescer::page_ptr& p) { answers.push_back(*p); };
  }
};

}  // namespace

TEST_CASE("scrape_coalescer: the first scrape starts a collection at once", "[metrics]") {
  scrape_coalescer c(100ms);
  scrape a;
  const auto step = c.request(t0, a.callback());
  CHECK(step.collect_now);
  CHECK_FALSE(step.wake_at);
  CHECK(c.collections() == 1);
  CHECK(a.answers.empty());
  const auto after = c.collected(t0 + 1ms, page("p1"));
  CHECK_FALSE(after.collect_now);
  CHECK_FALSE(after.wake_at);
  CHECK(a.answers == std::vector<std::string>{"p1"});
  CHECK(c.waiting() == 0);
}

TEST_CASE("scrape_coalescer: scrapes during a collection share the next one, never an older page",
          "[metrics]") {
  scrape_coalescer c(100ms);
  scrape a, b, d;
  REQUIRE(c.request(t0, a.callback()).collect_now);
  // b and d arrive while p1 is being gathered: p1 may predate them, so they wait for the next.
  CHECK_FALSE(c.request(t0 + 10ms, b.callback()).collect_now);
  CHECK_FALSE(c.request(t0 + 20ms, d.callback()).collect_now);
  CHECK(c.collections() == 1);
  // p1 arrives before the interval is over: the next collection is due at t0 + 100 ms.
  const auto step = c.collected(t0 + 30ms, page("p1"));
  CHECK(a.answers == std::vector<std::string>{"p1"});
  CHECK(b.answers.empty());
  CHECK_FALSE(step.collect_now);
  REQUIRE(step.wake_at);
  CHECK(*step.wake_at == t0 + 100ms);
  // Woken early (timer jitter the other way is impossible, but a spurious wake must do no harm).
  CHECK_FALSE(c.wake(t0 + 99ms).collect_now);
  REQUIRE(c.wake(t0 + 100ms).collect_now);
  CHECK(c.collections() == 2);
  c.collected(t0 + 120ms, page("p2"));
  CHECK(b.answers == std::vector<std::string>{"p2"});
  CHECK(d.answers == std::vector<std::string>{"p2"});
  CHECK(c.waiting() == 0);
}

TEST_CASE("scrape_coalescer: a flood costs one collection per interval", "[metrics]") {
  scrape_coalescer c(100ms);
  std::vector<scrape> scrapes(1000);
  auto now = t0;
  std::size_t next = 0;
  bool in_flight = false;
  auto wake = scrape_coalescer::clock::time_point::max();  // none asked for
  // One scrape every millisecond for a second; each collection takes 5 ms.
  scrape_coalescer::clock::time_point collect_done{};
  const auto follow = [&](const scrape_coalescer::next_step& s) {
    if (s.collect_now) {
      in_flight = true;
      collect_done = now + 5ms;
    }
    if (s.wake_at) wake = *s.wake_at;
  };
  for (int ms = 0; ms < 1000; ++ms, now += 1ms) {
    if (in_flight && now >= collect_done) {
      in_flight = false;
      follow(c.collected(now, page("p")));
    }
    if (now >= wake) {
      wake = scrape_coalescer::clock::time_point::max();
      follow(c.wake(now));
    }
    follow(c.request(now, scrapes[next++].callback()));
  }
  CHECK(c.collections() <= 11);  // at 0, 100, ..., 1000 ms at most
  CHECK(c.collections() >= 9);
  // Every scrape but those of the last interval was answered, each exactly once.
  std::size_t answered = 0;
  for (const auto& s : scrapes) {
    CHECK(s.answers.size() <= 1);
    answered += s.answers.size();
  }
  CHECK(answered + c.waiting() == scrapes.size());
  CHECK(c.waiting() <= 110);
}

TEST_CASE("scrape_coalescer: clear() drops the waiting scrapes unanswered", "[metrics]") {
  scrape_coalescer c(100ms);
  scrape a, b;
  REQUIRE(c.request(t0, a.callback()).collect_now);
  c.request(t0 + 1ms, b.callback());
  c.clear();
  CHECK(c.waiting() == 0);
  c.collected(t0 + 2ms, page("p1"));
  CHECK(a.answers.empty());
  CHECK(b.answers.empty());
}
