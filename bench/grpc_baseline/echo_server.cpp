#include "bench/grpc_baseline/echo_server.hpp"

#include <mutex>
#include <stdexcept>

namespace rdmarpc::bench::grpc_baseline {

// One call's state, used as its own completion-queue tag: first waiting for a request, then
// waiting for the reply to be sent. Each accepted request posts the next waiting call, so one
// call is always waiting, as in gRPC's async examples.
class echo_server::call {
 public:
  call(EchoBench::AsyncService& service, grpc::ServerCompletionQueue& cq) : service_(service), cq_(cq) {
    service_.RequestEcho(&context_, &request_, &responder_, &cq_, &cq_, this);
  }

  // Handles this call's completion; returns false when the call is over and may be deleted.
  bool proceed(bool ok) {
    if (state_ == state::finishing || !ok) return false;
    new call(service_, cq_);
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

echo_server::echo_server(const std::string& address) {
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
  new call(service_, *cq_);
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
    cq_->Shutdown();
  });
}

}  // namespace rdmarpc::bench::grpc_baseline
