#include "bench/grpc_baseline/echo_client.hpp"

#include <optional>
#include <stdexcept>
#include <vector>

namespace rdmarpc::bench::grpc_baseline {
namespace {

using clock = closed_loop::clock;

// One in-flight call. gRPC needs a fresh ClientContext per call; it is rebuilt in place.
struct slot {
  std::optional<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<EchoReply>> reader;
  EchoReply reply;
  grpc::Status status;
  clock::time_point started;
};

gpr_timespec to_gpr(clock::time_point t) {
  // gRPC's own monotonic clock differs from steady_clock's epoch: convert through "from now".
  const auto from_now = std::chrono::duration_cast<std::chrono::nanoseconds>(t - clock::now());
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_nanos(std::max<std::int64_t>(0, from_now.count()), GPR_TIMESPAN));
}

}  // namespace

echo_client::echo_client(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  channel_ = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  stub_ = EchoBench::NewStub(channel_);
}

bool echo_client::wait_connected(std::chrono::seconds timeout) {
  return channel_->WaitForConnected(to_gpr(clock::now() + timeout));
}

bench_result echo_client::run_point(std::uint64_t payload, std::uint64_t concurrency, const load_spec& load,
                                    progress& out) {
  EchoRequest request;
  request.set_payload(std::string(payload, 'x'));
  std::vector<slot> slots(concurrency);

  auto result = point_result("grpc", "tcp", "event", payload, concurrency);

  auto start = clock::now();
  closed_loop loop(load, start);
  out.begin(point_label(result), start);

  // A call starts at `started`: the first ones at now, every later one at the completion that
  // frees its slot (one clock read a call, as perftest takes one time stamp an iteration).
  auto issue = [&](slot& s, clock::time_point started) {
    s.context.reset();
    s.context.emplace();
    s.started = started;
    s.reader = stub_->AsyncEcho(&*s.context, request, &cq_);
    s.reader->Finish(&s.reply, &s.status, &s);
    loop.on_start();
  };
  for (auto& s : slots) {
    if (!loop.may_start()) break;
    issue(s, clock::now());
  }
  while (!loop.finished()) {
    void* tag = nullptr;
    bool ok = false;
    const auto next = cq_.AsyncNext(&tag, &ok, to_gpr(clock::now() + std::chrono::milliseconds(200)));
    const auto now = clock::now();
    if (next == grpc::CompletionQueue::SHUTDOWN) throw std::runtime_error("gRPC completion queue shut down");
    if (next == grpc::CompletionQueue::TIMEOUT) {
      if (now > loop.give_up_at()) throw std::runtime_error("gRPC benchmark point made no progress");
      out.tick(loop, now);
      continue;
    }
    auto& s = *static_cast<slot*>(tag);
    const bool good = ok && s.status.ok() && s.reply.payload().size() == payload;
    // Printed after the next call is on its way (which reuses s.status): no part of its latency.
    std::string failure;
    if (!good && loop.errors() == 0)
      failure = "grpc call failed: " + (ok ? s.status.error_message() : std::string("completion not ok"));
    loop.on_complete(s.started, now, good);
    if (loop.may_start()) issue(s, now);
    if (!failure.empty()) out.note(failure);
    out.tick(loop, now);
  }
  fill_from(result, loop, clock::now());
  out.end(result);
  return result;
}

namespace {

// One server stream of run_stream_point. Its completion-queue tags are its three events, each
// naming the stream and what completed.
struct stream_slot {
  enum class what { started, read, finished };
  struct event {
    stream_slot* slot;
    what kind;
  };
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientAsyncReader<EchoReply>> reader;
  EchoReply message;
  grpc::Status status;
  clock::time_point started;
  event started_tag{this, what::started}, read_tag{this, what::read}, finish_tag{this, what::finished};
};

}  // namespace

bench_result echo_client::run_stream_point(std::uint64_t payload, std::uint64_t streams,
                                           const load_spec& load, progress& out) {
  StreamRequest request;
  request.set_count(0);  // until cancelled: the point decides when it has seen enough
  request.set_payload_size(static_cast<std::uint32_t>(payload));
  std::vector<stream_slot> slots(streams);

  auto result = point_result("grpc", "tcp", "event", payload, streams, "server_stream");
  const auto start = clock::now();
  closed_loop loop(load, start);
  out.begin(point_label(result), start);

  auto read = [&](stream_slot& s, clock::time_point started) {
    s.started = started;
    loop.on_start();
    s.reader->Read(&s.message, &s.read_tag);
  };
  auto close = [&](stream_slot& s) {
    s.context.TryCancel();
    s.reader->Finish(&s.status, &s.finish_tag);
  };
  for (auto& s : slots) s.reader = stub_->AsyncStream(&s.context, request, &cq_, &s.started_tag);

  std::uint64_t open = streams;
  while (open > 0) {
    void* tag = nullptr;
    bool ok = false;
    const auto next = cq_.AsyncNext(&tag, &ok, to_gpr(clock::now() + std::chrono::milliseconds(200)));
    const auto now = clock::now();
    if (next == grpc::CompletionQueue::SHUTDOWN) throw std::runtime_error("gRPC completion queue shut down");
    if (next == grpc::CompletionQueue::TIMEOUT) {
      if (now > loop.give_up_at()) throw std::runtime_error("gRPC stream point made no progress");
      out.tick(loop, now);
      continue;
    }
    const auto& event = *static_cast<stream_slot::event*>(tag);
    auto& s = *event.slot;
    if (event.kind == stream_slot::what::finished) {
      --open;
      continue;
    }
    if (event.kind == stream_slot::what::started) {
      if (!ok) {
        out.note("grpc stream did not start");
        close(s);
        continue;
      }
      read(s, now);
      continue;
    }
    const bool good = ok && s.message.payload().size() == payload;
    const bool first_failure = !good && loop.errors() == 0;
    loop.on_complete(s.started, now, good);
    if (good && loop.may_start()) {
      read(s, now);
    } else {
      close(s);
    }
    if (first_failure) out.note(ok ? "grpc stream: short message" : "grpc stream ended early");
    out.tick(loop, now);
  }
  fill_from(result, loop, clock::now());
  out.end(result);
  return result;
}

void echo_client::idle(std::chrono::nanoseconds duration) {
  const auto until = clock::now() + duration;
  void* tag = nullptr;
  bool ok = false;
  while (clock::now() < until) {
    if (cq_.AsyncNext(&tag, &ok, to_gpr(until)) == grpc::CompletionQueue::SHUTDOWN) return;
  }
}

}  // namespace rdmarpc::bench::grpc_baseline
