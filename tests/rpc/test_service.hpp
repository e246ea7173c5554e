#pragma once
// A hand-written rdmarpc::service for the rpc tests (independent of protoc-gen-rdmarpc): Echo,
// Sleep (waits on a timer, or with sleep_ms == until_released until release_held(); records
// cancellation), Throw, Fail (status_error), Metadata (client
// metadata back in the reply and as server initial metadata, their count as trailing metadata;
// data "fail" answers NOT_FOUND with the same metadata, "flood" adds 100 trailing entries).
// Threading: handlers run on the server's connection executors; counters are atomics and the
// waits use a mutex + condition variable with bounded timeouts.

#include <array>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rpc/service.hpp"
#include "rpc_test.pb.h"

namespace rdmarpc::test {

class test_service final : public rdmarpc::service {
 public:
  static constexpr method_descriptor echo{"/rdmarpc.test.Test/Echo", method_id("/rdmarpc.test.Test/Echo")};
  static constexpr method_descriptor sleep{"/rdmarpc.test.Test/Sleep", method_id("/rdmarpc.test.Test/Sleep")};
  static constexpr method_descriptor throws{"/rdmarpc.test.Test/Throw",
                                            method_id("/rdmarpc.test.Test/Throw")};
  static constexpr method_descriptor fail{"/rdmarpc.test.Test/Fail", method_id("/rdmarpc.test.Test/Fail")};
  static constexpr method_descriptor meta{"/rdmarpc.test.Test/Metadata",
                                          method_id("/rdmarpc.test.Test/Metadata")};
  // Ticks: server streaming (StreamRequest -> EchoReply x count); Sum: client streaming (EchoRequest
  // x n -> EchoReply with the total size as text); Chat: bidi, echoes each message back (data
  // "fail" ends it ABORTED; client metadata "x-fail-at-once" ends it ABORTED before it reads).
  // Each echoes client metadata as initial metadata and sets trailing metadata "count" = messages
  // it read or wrote.
  static constexpr method_descriptor ticks{"/rdmarpc.test.Test/Ticks", method_id("/rdmarpc.test.Test/Ticks"),
                                           rpc_kind::server_streaming};
  static constexpr method_descriptor sum{"/rdmarpc.test.Test/Sum", method_id("/rdmarpc.test.Test/Sum"),
                                         rpc_kind::client_streaming};
  static constexpr method_descriptor chat{"/rdmarpc.test.Test/Chat", method_id("/rdmarpc.test.Test/Chat"),
                                          rpc_kind::bidi_streaming};
  static constexpr method_descriptor unknown{"/rdmarpc.test.Test/Nope", method_id("/rdmarpc.test.Test/Nope")};

  std::string_view full_name() const noexcept override { return "rdmarpc.test.Test"; }
  std::span<const method_descriptor> methods() const noexcept override { return methods_; }
  std::unique_ptr<server_call> new_call(std::size_t index) override;
  std::unique_ptr<server_stream_call> new_stream_call(std::size_t index) override;

  // Largest reply data Echo (reply_size) and Ticks (size, sizes) make up from a request; larger
  // asks are clamped. Unbounded for the tests; the fuzzer (tests/fuzz) keeps its inputs cheap.
  std::uint32_t max_made_up_bytes = UINT32_MAX;
  // A Sleep with this sleep_ms waits until release_held() (or its cancellation), not on a clock:
  // a test that needs calls to stay in flight while it checks something holds them this way, so
  // a slow machine cannot let them finish early.
  static constexpr std::uint32_t until_released = UINT32_MAX;
  // Lets every held Sleep, and every later one, finish normally; hold_again() makes later ones
  // wait again. Callable from any thread.
  void release_held();
  void hold_again() {
    std::lock_guard lock(mutex_);
    released_ = false;
  }

  // When set, Metadata adds the trailing entry "server" = name: which server of several answered.
  std::string name;

  // Observations, readable from any thread.
  std::atomic<int> sleeps_started{0};
  std::atomic<int> sleeps_cancelled{0};  // handler saw terminal cancellation / ctx.is_cancelled()
  std::atomic<int> sleeps_finished{0};
  std::atomic<int> concurrent{0};
  std::atomic<int> max_concurrent{0};
  std::atomic<int> streams_started{0};
  std::atomic<int> streams_cancelled{0};  // a stream handler saw its stream end under it
  std::atomic<int> streams_finished{0};
  std::atomic<int> ticks_written{0};  // Ticks messages whose write completed

  // Waits (bounded) until pred() holds; pred reads the atomics above.
  template <typename Pred>
  bool wait_for(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, pred);
  }

 private:
  void notify() {
    { std::lock_guard lock(mutex_); }
    cv_.notify_all();
  }
  boost::asio::awaitable<EchoReply> do_echo(server_context& ctx, const EchoRequest& req);
  boost::asio::awaitable<EchoReply> do_sleep(server_context& ctx, const EchoRequest& req);
  boost::asio::awaitable<EchoReply> do_throw(server_context& ctx, const EchoRequest& req);
  boost::asio::awaitable<EchoReply> do_fail(server_context& ctx, const EchoRequest& req);
  boost::asio::awaitable<EchoReply> do_metadata(server_context& ctx, const EchoRequest& req);
  boost::asio::awaitable<void> do_ticks(server_context& ctx, const StreamRequest& req,
                                        server_writer<EchoReply>& out);
  boost::asio::awaitable<EchoReply> do_sum(server_context& ctx, server_reader<EchoRequest>& in);
  boost::asio::awaitable<void> do_chat(server_context& ctx, server_reader_writer<EchoRequest, EchoReply>& io);
  void stream_ended(server_context& ctx, bool finished);

  static constexpr std::array<method_descriptor, 8> methods_{echo, sleep, throws, fail,
                                                             meta, ticks, sum,    chat};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool released_ = false;                                       // guarded by mutex_
  std::vector<std::weak_ptr<boost::asio::steady_timer>> held_;  // guarded by mutex_
};

}  // namespace rdmarpc::test
