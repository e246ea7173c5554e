#include "test_service.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <stdexcept>
#include <string>

#include "rpc/status.hpp"

namespace rdmarpc::test {

boost::asio::awaitable<EchoReply> test_service::do_sleep(server_context& ctx, const EchoRequest& req) {
  const int now = ++concurrent;
  for (int seen = max_concurrent.load(); now > seen && !max_concurrent.compare_exchange_weak(seen, now);) {
  }
  ++sleeps_started;
  notify();
  auto timer = std::make_shared<boost::asio::steady_timer>(co_await boost::asio::this_coro::executor);
  bool held = false;
  if (req.sleep_ms() == until_released) {
    std::lock_guard lock(mutex_);
    held = !released_;
    if (held) {
      timer->expires_at(boost::asio::steady_timer::time_point::max());
      held_.push_back(timer);
    }
  } else {
    timer->expires_after(std::chrono::milliseconds(req.sleep_ms()));
  }
  try {
    co_await timer->async_wait(boost::asio::use_awaitable);
  } catch (const boost::system::system_error&) {
    // Only release_held() cancels a held timer without cancelling the call; anything else is
    // terminal cancellation from the server (deadline, cancel frame, connection closed). Not
    // re-checked against released_: a hold_again() right after release_held() must not turn the
    // release into a failure.
    const bool released = held && !ctx.is_cancelled();
    if (!released) {
      --concurrent;
      if (ctx.is_cancelled()) ++sleeps_cancelled;
      notify();
      throw;
    }
  }
  --concurrent;
  ++sleeps_finished;
  notify();
  EchoReply reply;
  reply.set_data(req.data());
  co_return reply;
}

void test_service::release_held() {
  std::vector<std::weak_ptr<boost::asio::steady_timer>> held;
  {
    std::lock_guard lock(mutex_);
    released_ = true;
    held.swap(held_);
  }
  // A timer is cancelled on its own executor: the handler waiting on it may run on another thread.
  for (auto& weak : held) {
    if (auto timer = weak.lock()) {
      boost::asio::post(timer->get_executor(), [timer] { timer->cancel(); });
    }
  }
}

boost::asio::awaitable<EchoReply> test_service::do_echo(server_context&, const EchoRequest& req) {
  EchoReply reply;
  // Two branches, not ?: (which would copy req.data() into a temporary: an allocation the
  // allocation test would charge to the framework).
  if (req.reply_size() > 0) {
    reply.set_data(std::string(std::min(req.reply_size(), max_made_up_bytes), 'r'));
  } else {
    reply.set_data(req.data());
  }
  co_return reply;
}

boost::asio::awaitable<EchoReply> test_service::do_throw(server_context&, const EchoRequest&) {
  throw std::runtime_error("boom");
  co_return EchoReply{};
}

boost::asio::awaitable<EchoReply> test_service::do_fail(server_context&, const EchoRequest& req) {
  throw status_error(status_code::not_found, "no such key: " + req.data());
  co_return EchoReply{};
}

namespace {
// Every request metadata entry comes back in the initial metadata as "echo-<key>", except
// x-grpc-test-echo-trailing-bin, which comes back as it is in the trailing metadata (as gRPC's
// interop server does for custom_metadata).
void echo_metadata(server_context& ctx) {
  for (const auto& [key, value] : ctx.client_metadata()) {
    if (key == "x-grpc-test-echo-trailing-bin") {
      ctx.add_trailing_metadata(key, value);
    } else {
      ctx.add_initial_metadata("echo-" + key, value);
    }
  }
}
}  // namespace

boost::asio::awaitable<EchoReply> test_service::do_metadata(server_context& ctx, const EchoRequest& req) {
  EchoReply reply;
  for (const auto& [key, value] : ctx.client_metadata())
    reply.mutable_data()->append(key + "=" + value + ";");
  echo_metadata(ctx);
  ctx.add_trailing_metadata("count", std::to_string(ctx.client_metadata().size()));
  if (!name.empty()) ctx.add_trailing_metadata("server", name);
  if (req.data() == "fail") ctx.set_status(status_code::not_found, "failed as asked");
  if (req.data() == "flood" || req.data() == "flood and fail") {  // more than a client accepts (64)
    for (int i = 0; i < 100; ++i) ctx.add_trailing_metadata("k" + std::to_string(i), "v");
  }
  if (req.data() == "flood and fail") ctx.set_status(status_code::aborted, "flooded");
  co_return reply;
}

void test_service::stream_ended(server_context& ctx, bool finished) {
  if (ctx.is_cancelled()) ++streams_cancelled;
  if (finished) ++streams_finished;
  notify();
}

boost::asio::awaitable<void> test_service::do_ticks(server_context& ctx, const StreamRequest& req,
                                                    server_writer<EchoReply>& out) {
  ++streams_started;
  notify();
  echo_metadata(ctx);
  EchoReply reply;
  std::uint32_t i = 0;
  try {
    const auto total = req.sizes_size() > 0 ? static_cast<std::uint32_t>(req.sizes_size()) : req.count();
    for (; req.forever() || i < total; ++i) {
      const std::uint32_t size =
          std::min(req.sizes_size() > 0 ? req.sizes(static_cast<int>(i)) : req.size(), max_made_up_bytes);
      reply.set_data(std::string(size, static_cast<char>('a' + i % 26)));
      co_await out.async_write(reply, boost::asio::use_awaitable);
      ++ticks_written;
      notify();
    }
  } catch (const boost::system::system_error&) {
    stream_ended(ctx, false);
    throw;
  }
  ctx.add_trailing_metadata("count", std::to_string(i));
  if (req.status() != 0) ctx.set_status(static_cast<status_code>(req.status()), req.status_message());
  stream_ended(ctx, true);
}

// Sum and Chat read with as_tuple (errors as values) but the coroutine's co_await itself throws
// operation_aborted when the stream was cancelled before the next operation starts: both count as
// a cancelled stream.
boost::asio::awaitable<EchoReply> test_service::do_sum(server_context& ctx, server_reader<EchoRequest>& in) {
  ++streams_started;
  notify();
  echo_metadata(ctx);
  EchoRequest req;
  std::size_t total = 0, n = 0;
  try {
    for (;;) {
      auto [ec] = co_await in.async_read(req, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (is_end_of_stream(ec)) break;
      if (ec) throw boost::system::system_error(ec);
      total += req.data().size();
      ++n;
    }
  } catch (const boost::system::system_error&) {
    stream_ended(ctx, false);
    throw;
  }
  ctx.add_trailing_metadata("count", std::to_string(n));
  stream_ended(ctx, true);
  EchoReply reply;
  reply.set_data(std::to_string(total));
  co_return reply;
}

boost::asio::awaitable<void> test_service::do_chat(server_context& ctx,
                                                   server_reader_writer<EchoRequest, EchoReply>& io) {
  ++streams_started;
  notify();
  echo_metadata(ctx);
  // Ends before its first co_await: the handler finishes inside the stream's start.
  for (const auto& [key, value] : ctx.client_metadata()) {
    if (key == "x-fail-at-once") {
      stream_ended(ctx, true);
      throw status_error(status_code::aborted, "chat failed at once");
    }
  }
  EchoRequest req;
  EchoReply reply;
  std::size_t n = 0;
  try {
    for (;;) {
      auto [ec] = co_await io.async_read(req, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (is_end_of_stream(ec)) break;
      if (ec) throw boost::system::system_error(ec);
      if (req.data() == "fail") {
        stream_ended(ctx, true);
        throw status_error(status_code::aborted, "chat failed as asked");
      }
      reply.set_data(req.data());
      auto [wec] = co_await io.async_write(reply, boost::asio::as_tuple(boost::asio::use_awaitable));
      if (wec) throw boost::system::system_error(wec);
      ++n;
    }
  } catch (const boost::system::system_error&) {
    stream_ended(ctx, false);
    throw;
  }
  ctx.add_trailing_metadata("count", std::to_string(n));
  stream_ended(ctx, true);
}

std::unique_ptr<server_stream_call> test_service::new_stream_call(std::size_t index) {
  switch (index) {
    case 5:
      return std::make_unique<server_streaming_call<test_service, StreamRequest, EchoReply>>(
          *this, &test_service::do_ticks);
    case 6:
      return std::make_unique<client_streaming_call<test_service, EchoRequest, EchoReply>>(
          *this, &test_service::do_sum);
    case 7:
      return std::make_unique<bidi_streaming_call<test_service, EchoRequest, EchoReply>>(
          *this, &test_service::do_chat);
    default: return nullptr;
  }
}

std::unique_ptr<server_call> test_service::new_call(std::size_t index) {
  using call = member_server_call<test_service, EchoRequest, EchoReply>;
  switch (index) {
    case 0: return std::make_unique<call>(*this, &test_service::do_echo);
    case 1: return std::make_unique<call>(*this, &test_service::do_sleep);
    case 2: return std::make_unique<call>(*this, &test_service::do_throw);
    case 3: return std::make_unique<call>(*this, &test_service::do_fail);
    case 4: return std::make_unique<call>(*this, &test_service::do_metadata);
    default: return nullptr;
  }
}

}  // namespace rdmarpc::test
