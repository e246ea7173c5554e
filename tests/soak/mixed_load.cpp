#include "mixed_load.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <condition_variable>
#include <optional>
#include <random>

#include "io_thread.hpp"
#include "rpc/channel.hpp"
#include "rpc/client_context.hpp"
#include "rpc/status.hpp"
#include "rpc/stream.hpp"
#include "rpc/unary_call.hpp"
#include "test_service.hpp"

namespace rdmarpc::soak {
namespace {

using clock = std::chrono::steady_clock;
using boost::asio::awaitable;
using test::EchoReply;
using test::EchoRequest;
using test::StreamRequest;
using test::test_service;
constexpr auto as_tuple_awaitable = boost::asio::as_tuple(boost::asio::use_awaitable);
constexpr std::size_t kProblemsKept = 20;
constexpr std::uint32_t kSmallMax = 4096;  // the small messages: 0..4 KiB

// A call's result: its status, and what was wrong with an OK reply (empty when nothing).
struct outcome {
  status_code code = status_code::ok;
  std::string wrong;
};

outcome from(const boost::system::error_code& ec) {
  return {to_status_code(ec), {}};
}

// Content that differs from call to call (salt) and along the message, so a reply mixed up with
// another call's, cut short or shifted does not compare equal.
std::string pattern(std::size_t n, std::uint64_t salt) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + salt) ^ (i >> 9));
  return s;
}

// Empty when `got` is `want`; else where they differ.
std::string compare(std::string_view what, const std::string& want, const std::string& got) {
  if (want == got) return {};
  const auto at = std::mismatch(want.begin(), want.end(), got.begin(), got.end()).first - want.begin();
  return std::string(what) + ": asked for " + std::to_string(want.size()) + " bytes, got " +
         std::to_string(got.size()) + ", first difference at byte " + std::to_string(at);
}

// Ticks message i of `size` bytes is size x ('a' + i % 26).
std::string check_tick(const EchoReply& m, std::uint32_t i, std::uint32_t size) {
  const char c = static_cast<char>('a' + i % 26);
  if (m.data().size() == size &&
      std::all_of(m.data().begin(), m.data().end(), [c](char x) { return x == c; }))
    return {};
  return "ticks message " + std::to_string(i) + ": asked for " + std::to_string(size) + " x '" + c +
         "', got " + std::to_string(m.data().size()) + " bytes";
}

}  // namespace

std::string_view to_string(call_kind k) noexcept {
  switch (k) {
    case call_kind::echo_small: return "echo small";
    case call_kind::echo_large: return "echo large";
    case call_kind::ticks: return "ticks (server stream)";
    case call_kind::sum: return "sum (client stream)";
    case call_kind::chat: return "chat (bidi)";
  }
  return "?";
}

std::uint64_t load_counts::failed_total() const {
  std::uint64_t n = 0;
  for (const auto& [code, count] : failed) n += count;
  return n;
}

class mixed_load::impl : public std::enable_shared_from_this<impl> {
 public:
  explicit impl(load_options o) : o_(o) {}

  void start(const std::string& uri_list) {
    for (std::size_t i = 0; i < std::max<std::size_t>(1, o_.client_threads); ++i)
      threads_.push_back(std::make_unique<io_thread>());
    channel_options co;
    co.load_balancing = load_balancing_policy::round_robin;
    {
      std::lock_guard lock(mutex_);  // set before any loop can end
      loops_running_ = o_.channels * o_.calls_per_channel;
    }
    for (std::size_t c = 0; c < o_.channels; ++c) {
      auto ch = channel::create(threads_[c % threads_.size()]->executor(), uri_list, co);
      channels_.push_back(ch);
      for (std::size_t l = 0; l < o_.calls_per_channel; ++l) {
        boost::asio::co_spawn(ch->get_executor(),
                              loop(shared_from_this(), ch, o_.seed * 1000003 + c * 101 + l),
                              boost::asio::detached);
      }
    }
  }

  load_counts counts() const {
    std::lock_guard lock(mutex_);
    load_counts c = counts_;
    c.in_flight = 0;
    for (const auto& [id, call] : open_)
      if (!call.hung) ++c.in_flight;
    return c;
  }

  void check_hung() {
    std::lock_guard lock(mutex_);
    const auto now = clock::now();
    for (auto& [id, call] : open_) {
      if (call.hung || now <= call.deadline + o_.margin) continue;
      call.hung = true;
      ++counts_.hung;
      ++counts_.kinds[static_cast<std::size_t>(call.kind)].failed;
      note("hung: " + describe(call) + ", not completed " + ms(now - call.deadline) + " past its deadline");
    }
  }

  bool stop(std::chrono::milliseconds limit) {
    stopping_ = true;
    bool all = false;
    {
      std::unique_lock lock(mutex_);
      all = loops_done_.wait_for(lock, limit, [this] { return loops_running_ == 0; });
    }
    check_hung();
    return all;
  }

  void close() {
    stopping_ = true;
    for (auto& ch : channels_) ch->close();
    channels_.clear();
    threads_.clear();  // each finishes what the closed channels left and joins
  }

  channel_stats channel_totals() const {
    channel_stats t;
    for (const auto& ch : channels_) {
      const auto s = ch->stats();
      t.calls_started += s.calls_started;
      t.calls_ok += s.calls_ok;
      t.calls_failed += s.calls_failed;
      t.connects += s.connects;
      t.connect_failures += s.connect_failures;
      t.disconnects += s.disconnects;
      t.going_aways += s.going_aways;
      t.pings_sent += s.pings_sent;
      t.pongs_received += s.pongs_received;
      t.pings_received += s.pings_received;
      t.heartbeat_timeouts += s.heartbeat_timeouts;
      t.too_many_pings += s.too_many_pings;
    }
    return t;
  }

  std::chrono::milliseconds longest_call() const noexcept {
    return std::max(o_.deadline, o_.large_deadline) + o_.margin;
  }

 private:
  struct open_call {
    call_kind kind;
    clock::time_point start, deadline;
    bool hung = false;
  };

  std::string ms(clock::duration d) const {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
  }
  std::string describe(const open_call& c) const {
    return std::string(to_string(c.kind)) + " started at " + ms(c.start - t0_) + " with a deadline of " +
           ms(c.deadline - c.start);
  }
  void note(std::string problem) {  // under mutex_
    if (counts_.first_problems.size() < kProblemsKept) counts_.first_problems.push_back(std::move(problem));
  }

  std::uint64_t begin(call_kind k, clock::time_point start, clock::time_point deadline) {
    std::lock_guard lock(mutex_);
    const auto id = next_id_++;
    open_.emplace(id, open_call{k, start, deadline});
    ++counts_.started;
    ++counts_.kinds[static_cast<std::size_t>(k)].started;
    return id;
  }

  void end(std::uint64_t id, const outcome& r) {
    std::lock_guard lock(mutex_);
    const auto now = clock::now();
    const auto it = open_.find(id);
    const open_call call = it->second;
    open_.erase(it);
    const double overrun = std::chrono::duration<double, std::milli>(now - call.deadline).count();
    counts_.max_overrun_ms = std::max(counts_.max_overrun_ms.value_or(overrun), overrun);
    if (call.hung) return;  // counted when it was found hung
    auto& kind = counts_.kinds[static_cast<std::size_t>(call.kind)];
    if (now > call.deadline + o_.margin) {
      ++counts_.late;
      ++kind.failed;
      note("late: " + describe(call) + ", completed " + std::string(to_string(r.code)) + " " +
           ms(now - call.deadline) + " past its deadline");
    } else if (!r.wrong.empty()) {
      ++counts_.wrong;
      ++kind.failed;
      note("wrong reply: " + describe(call) + ": " + r.wrong);
    } else if (r.code == status_code::ok) {
      ++counts_.ok;
      ++kind.ok;
    } else {
      ++counts_.failed[std::string(to_string(r.code))];
      ++kind.failed;
    }
  }

  void loop_done() {
    {
      std::lock_guard lock(mutex_);
      --loops_running_;
    }
    loops_done_.notify_all();
  }

  // One closed loop: a call, its accounting, the next call, until stopped.
  static awaitable<void> loop(std::shared_ptr<impl> self, std::shared_ptr<channel> ch, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto percent = [&rng](unsigned p) { return std::uniform_int_distribution<unsigned>(0, 99)(rng) < p; };
    const auto& o = self->o_;
    while (!self->stopping_) {
      const unsigned pick = std::uniform_int_distribution<unsigned>(0, 99)(rng);
      const bool large = percent(o.large_percent);
      call_kind kind = pick < 55   ? (large ? call_kind::echo_large : call_kind::echo_small)
                       : pick < 70 ? call_kind::ticks
                       : pick < 85 ? call_kind::sum
                                   : call_kind::chat;
      client_context ctx;
      const auto start = clock::now();
      const auto deadline = start + (kind == call_kind::echo_small ? o.deadline : o.large_deadline);
      ctx.set_deadline(deadline);
      ctx.set_wait_for_ready(percent(o.wait_for_ready_percent));
      const auto id = self->begin(kind, start, deadline);
      outcome r;
      try {
        switch (kind) {
          case call_kind::echo_small:
          case call_kind::echo_large: r = co_await self->echo(*ch, ctx, large, rng); break;
          case call_kind::ticks: r = co_await self->ticks(*ch, ctx, large, rng); break;
          case call_kind::sum: r = co_await self->sum(*ch, ctx, large, rng); break;
          case call_kind::chat: r = co_await self->chat(*ch, ctx, large, rng); break;
        }
      } catch (const std::exception& e) {
        r = {status_code::ok, std::string("exception: ") + e.what()};
      }
      self->end(id, r);
    }
    self->loop_done();
  }

  std::uint32_t small_size(std::mt19937_64& rng) const {
    return std::uniform_int_distribution<std::uint32_t>(0, kSmallMax)(rng);
  }

  // Unary Echo: small data echoed; large either 1 MiB echoed or a 1 MiB made-up reply.
  awaitable<outcome> echo(channel& ch, client_context& ctx, bool large, std::mt19937_64& rng) {
    EchoRequest req;
    const bool made_up = large && rng() % 2 == 0;
    if (made_up) {
      req.set_reply_size(static_cast<std::uint32_t>(o_.large_bytes));
    } else {
      req.set_data(pattern(large ? o_.large_bytes : small_size(rng), rng()));
    }
    auto [ec, reply] =
        co_await async_unary_call<EchoReply>(ch, test_service::echo, &ctx, req, as_tuple_awaitable);
    if (ec) co_return from(ec);
    if (made_up)
      co_return outcome{status_code::ok,
                        compare("echo reply_size", std::string(o_.large_bytes, 'r'), reply.data())};
    co_return outcome{status_code::ok, compare("echo", req.data(), reply.data())};
  }

  // Server streaming: 1..16 messages of up to 4 KiB, or a few with a large one among them.
  awaitable<outcome> ticks(channel& ch, client_context& ctx, bool large, std::mt19937_64& rng) {
    StreamRequest req;
    if (large) {
      const auto n = std::uniform_int_distribution<int>(1, 4)(rng);
      const auto big = std::uniform_int_distribution<int>(0, n - 1)(rng);
      for (int i = 0; i < n; ++i)
        req.add_sizes(i == big ? static_cast<std::uint32_t>(o_.large_bytes) : small_size(rng));
    } else {
      req.set_count(std::uniform_int_distribution<std::uint32_t>(1, 16)(rng));
      req.set_size(small_size(rng));
    }
    const std::uint32_t total = large ? static_cast<std::uint32_t>(req.sizes_size()) : req.count();
    client_stream<StreamRequest, EchoReply> s(ch.start_stream(test_service::ticks, &ctx, &req));
    EchoReply m;
    std::uint32_t got = 0;
    std::string wrong;
    boost::system::error_code read_ec;
    for (;;) {
      auto [ec] = co_await s.async_read(m, as_tuple_awaitable);
      if (ec) {
        read_ec = ec;
        break;
      }
      if (got >= total) {
        wrong = "ticks: more than the " + std::to_string(total) + " messages asked for";
      } else {
        wrong = check_tick(m, got, large ? req.sizes(static_cast<int>(got)) : req.size());
      }
      if (!wrong.empty()) break;
      ++got;
    }
    co_return co_await finish(s, wrong, read_ec, [&]() -> std::string {
      if (got == total) return {};
      return "ticks: " + std::to_string(got) + " of " + std::to_string(total) + " messages, then OK";
    });
  }

  // Client streaming: 1..16 messages (one of them large when asked); the reply is their total size.
  awaitable<outcome> sum(channel& ch, client_context& ctx, bool large, std::mt19937_64& rng) {
    const auto n = std::uniform_int_distribution<int>(1, 16)(rng);
    const auto big = large ? std::uniform_int_distribution<int>(0, n - 1)(rng) : -1;
    client_stream<EchoRequest, EchoReply> s(ch.start_stream(test_service::sum, &ctx, nullptr));
    EchoRequest req;
    std::size_t total = 0;
    boost::system::error_code ec;
    for (int i = 0; i < n && !ec; ++i) {
      req.set_data(pattern(i == big ? o_.large_bytes : small_size(rng), rng()));
      total += req.data().size();
      std::tie(ec) = co_await s.async_write(req, as_tuple_awaitable);
    }
    if (!ec) std::tie(ec) = co_await s.async_writes_done(as_tuple_awaitable);
    EchoReply reply;
    if (!ec) std::tie(ec) = co_await s.async_read(reply, as_tuple_awaitable);
    co_return co_await finish(s, {}, ec, [&]() -> std::string {
      if (ec) return "sum: the reply's read failed (" + ec.message() + "), then OK";
      return compare("sum", std::to_string(total), reply.data());
    });
  }

  // Bidi: 1..8 rounds of a message and its echo, then the end of the stream.
  awaitable<outcome> chat(channel& ch, client_context& ctx, bool large, std::mt19937_64& rng) {
    const auto n = std::uniform_int_distribution<int>(1, 8)(rng);
    const auto big = large ? std::uniform_int_distribution<int>(0, n - 1)(rng) : -1;
    client_stream<EchoRequest, EchoReply> s(ch.start_stream(test_service::chat, &ctx, nullptr));
    EchoRequest req;
    EchoReply reply;
    std::string wrong;
    boost::system::error_code ec;
    for (int i = 0; i < n && !ec && wrong.empty(); ++i) {
      req.set_data(pattern(i == big ? o_.large_bytes : small_size(rng), rng()));
      std::tie(ec) = co_await s.async_write(req, as_tuple_awaitable);
      if (!ec) std::tie(ec) = co_await s.async_read(reply, as_tuple_awaitable);
      if (!ec) wrong = compare("chat round " + std::to_string(i), req.data(), reply.data());
    }
    if (!ec && wrong.empty()) std::tie(ec) = co_await s.async_writes_done(as_tuple_awaitable);
    if (!ec && wrong.empty()) {
      std::tie(ec) = co_await s.async_read(reply, as_tuple_awaitable);
      if (!ec) wrong = "chat: a message after the last echo";
    }
    co_return co_await finish(s, wrong, ec, [] { return std::string(); });
  }

  // A stream's status: CANCELLED-and-wrong when its content was wrong (it is cancelled first),
  // else the status from finish; an OK status is checked with `check_ok` and must agree with how
  // the reads ended (`ec`: end of stream or nothing).
  template <typename Write, typename Read, typename CheckOk>
  awaitable<outcome> finish(client_stream<Write, Read>& s, const std::string& wrong,
                            boost::system::error_code ec, CheckOk check_ok) {
    if (!wrong.empty()) s.cancel();
    auto [status] = co_await s.async_finish(as_tuple_awaitable);
    if (!wrong.empty()) co_return outcome{status_code::ok, wrong};
    if (status) co_return from(status);
    if (ec && !is_end_of_stream(ec))
      co_return outcome{status_code::ok,
                        "stream: an operation failed (" + ec.message() + ") but it finished OK"};
    co_return outcome{status_code::ok, check_ok()};
  }

  load_options o_;
  const clock::time_point t0_ = clock::now();
  std::vector<std::unique_ptr<io_thread>> threads_;
  std::vector<std::shared_ptr<channel>> channels_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::condition_variable loops_done_;
  std::size_t loops_running_ = 0;  // under mutex_
  std::unordered_map<std::uint64_t, open_call> open_;
  std::uint64_t next_id_ = 0;
  load_counts counts_;
};

mixed_load::mixed_load(const std::string& uri_list, load_options options)
    : impl_(std::make_shared<impl>(options)) {
  impl_->start(uri_list);
}

mixed_load::~mixed_load() {
  impl_->stop(impl_->longest_call());
  impl_->close();
}

load_counts mixed_load::counts() const {
  return impl_->counts();
}
void mixed_load::check_hung() {
  impl_->check_hung();
}
bool mixed_load::stop(std::chrono::milliseconds limit) {
  return impl_->stop(limit);
}
channel_stats mixed_load::channel_totals() const {
  return impl_->channel_totals();
}
std::chrono::milliseconds mixed_load::longest_call() const noexcept {
  return impl_->longest_call();
}

}  // namespace rdmarpc::soak
