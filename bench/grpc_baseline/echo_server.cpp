#include "bench/grpc_baseline/echo_server.hpp"

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

namespace rdmarpc::bench::grpc_baseline {

// Streams outlive Server::Shutdown() (a stream the client cancelled is over for gRPC's core while
// its last Write may still complete), so a stream operation is started only under this lock and
// while the completion queue is open: none can reach the queue after shutdown() closed it.
struct echo_server::queue_gate {
  std::mutex mutex;
  bool closed = false;
};

// A call's state, used as its own completion-queue tag.
class echo_server::call {
 public:
  virtual ~call() = default;
  // Handles this call's completion; returns false when the call is over and may be deleted.
  virtual bool proceed(bool ok) = 0;
};

namespace {

// A unary Echo: first waiting for a request, then waiting for the reply to be sent. Each accepted
// request posts the next waiting call, so one call is always waiting, as in gRPC's async examples.
class echo_call final : public echo_server::call {
 public:
  echo_call(EchoBench::AsyncService& service, grpc::ServerCompletionQueue& cq) : service_(service), cq_(cq) {
    service_.RequestEcho(&context_, &request_, &responder_, &cq_, &cq_, this);
  }

  bool proceed(bool ok) override {
    if (state_ == state::finishing || !ok) return false;
    new echo_call(service_, cq_);
    reply_.set_payload(request_.payload());
    state_ = state::finishing;
    responder_.Finish(reply_, grpc::Status::OK, this);
    return true;
  }

 private:
  enum class state { waiting, finishing };
  EchoBench::AsyncService& service_;
  grpc::ServerCompletionQueue& cq_;
  grpc::ServerContext context_;
  EchoRequest request_;
  EchoReply reply_;
  grpc::ServerAsyncResponseWriter<EchoReply> responder_{&context_};
  state state_ = state::waiting;
};

// A server-streaming Stream, as the STREAMING_FROM_SERVER server of gRPC's own qps benchmark
// (test/cpp/qps/server_async.cc) runs it: one Write outstanding at a time, the next one issued
// from the previous one's completion; Finish once `count` were written. A failed write means the
// client cancelled: the call is dead and is deleted without Finish (as the qps server resets it;
// a Finish racing the server's shutdown would queue on a completion queue already shut down).
// The next waiting call is posted when a stream is accepted.
class stream_call final : public echo_server::call {
 public:
  stream_call(EchoBench::AsyncService& service, grpc::ServerCompletionQueue& cq,
              echo_server::queue_gate& gate)
      : service_(service), cq_(cq), gate_(gate) {
    service_.RequestStream(&context_, &request_, &writer_, &cq_, &cq_, this);
  }

  bool proceed(bool ok) override {
    switch (state_) {
      case state::waiting:
        if (!ok) return false;  // the server is shutting down
        if (!start([&] { new stream_call(service_, cq_, gate_); })) return false;
        reply_.set_payload(std::string(request_.payload_size(), 'x'));
        state_ = state::writing;
        return write_or_finish();
      case state::writing: return ok && write_or_finish();
      case state::finishing: return false;
    }
    return false;
  }

 private:
  enum class state { waiting, writing, finishing };

  // False when the queue is closed: nothing is pending on this call then, it may be deleted.
  bool write_or_finish() {
    if (request_.count() == 0 || sent_ < request_.count()) {
      ++sent_;
      return start([&] { writer_.Write(reply_, this); });
    }
    state_ = state::finishing;
    return start([&] { writer_.Finish(grpc::Status::OK, this); });
  }

  template <class Op>
  bool start(Op&& op) {
    std::lock_guard lock(gate_.mutex);
    if (gate_.closed) return false;
    op();
    return true;
  }

  EchoBench::AsyncService& service_;
  grpc::ServerCompletionQueue& cq_;
  grpc::ServerContext context_;
  StreamRequest request_;
  EchoReply reply_;
  grpc::ServerAsyncWriter<EchoReply> writer_{&context_};
  echo_server::queue_gate& gate_;
  std::uint64_t sent_ = 0;
  state state_ = state::waiting;
};

}  // namespace

echo_server::echo_server(const std::string& address) : gate_(std::make_unique<queue_gate>()) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(&service_);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  cq_ = builder.AddCompletionQueue();
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) throw std::runtime_error("gRPC server cannot listen on " + address);
}

echo_server::~echo_server() {
  shutdown();
  // Reclaims the calls still queued when run() never ran or was not drained.
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) delete static_cast<call*>(tag);
}

void echo_server::run() {
  new echo_call(service_, *cq_);
  new stream_call(service_, *cq_, *gate_);
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    auto* c = static_cast<call*>(tag);
    if (!c->proceed(ok)) delete c;
  }
}

void echo_server::shutdown() {
  std::call_once(shutdown_once_, [this] {
    server_->Shutdown();
    std::lock_guard lock(gate_->mutex);
    gate_->closed = true;
    cq_->Shutdown();
  });
}

}  // namespace rdmarpc::bench::grpc_baseline
