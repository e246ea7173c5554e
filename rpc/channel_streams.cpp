// channel_impl's streams: starting, registering, routing their frames and ending them (channel_impl.hpp).
#include "rpc/channel_impl.hpp"

namespace rdmarpc::channel_detail {

std::shared_ptr<stream_io> channel_impl::start_stream(const method_descriptor& method,
                                                      client_context* context,
                                                      const google::protobuf::MessageLite* first_request) {
  stream_core::settings s;
  s.side = stream_state::side::client;
  s.id = allocate_id();
  s.receive_window = normalised(options_.stream_window);
  s.max_metadata_entries = options_.max_metadata_entries;
  s.max_metadata_bytes = options_.max_metadata_bytes;
  auto core = std::make_shared<stream_core>(ex_, weak_from_this(), s);
  if (context != nullptr) {
    context->mutable_server_initial_metadata().clear();
    context->mutable_server_trailing_metadata().clear();
  }
  std::string first;
  bool serialized = true;
  if (first_request != nullptr)
    serialized = first_request->IsInitialized() && first_request->SerializeToString(&first);
  stream_interception icpt{method, context};
  metadata added;
  call_verdict verdict;
  if (!chain_.empty()) [[unlikely]] {
    icpt.started = clock::now();
    verdict = chain_.start(client_call_info{method, context, true}, added, icpt.asked);
  }
  // Not shared yet: the frames are queued here, sent once the stream is registered and connected.
  core->open(method, context, deadline_of(context), std::move(first), first_request != nullptr, added);
  calls_started_.fetch_add(1, std::memory_order_relaxed);
  const bool wait_for_ready = context != nullptr && context->wait_for_ready();
  auto reg = [self = shared_from_this(), core, serialized, wait_for_ready, icpt,
              verdict = std::move(verdict)]() mutable {
    self->register_stream(core, serialized, wait_for_ready, icpt, std::move(verdict));
  };
  if (on_own_thread()) {
    reg();
  } else {
    boost::asio::post(ex_, std::move(reg));
  }
  return core;
}

void channel_impl::stream_ended(std::uint32_t id, status_code code) {
  if (auto it = intercepted_streams_.find(id); it != intercepted_streams_.end()) [[unlikely]] {
    auto icpt = std::move(it->second);
    intercepted_streams_.erase(it);
    end_stream_interception(icpt, *icpt.core);
  }
  streams_.erase(id);
  (code == status_code::ok ? calls_ok_ : calls_failed_).fetch_add(1, std::memory_order_relaxed);
  if (released_) maybe_close_released();
}

void channel_impl::register_stream(const std::shared_ptr<stream_core>& core, bool serialized,
                                   bool wait_for_ready, const stream_interception& icpt,
                                   call_verdict verdict) {
  if (icpt.asked != 0) [[unlikely]] {
    // Ended before it got here (cancelled; its end was reported without us): told now.
    if (core->ended()) return end_stream_interception(icpt, *core);
    if (verdict.code != status_code::ok) {
      core->fail(verdict.code, verdict.message);
      return end_stream_interception(icpt, *core);
    }
    // Any other end comes through stream_ended (which finds it here), the failures below too.
    auto held = icpt;
    held.core = core;
    intercepted_streams_.emplace(core->id(), std::move(held));
  }
  if (core->ended()) return;  // cancelled before it got here (its end was reported)
  if (!serialized)
    return core->fail(status_code::invalid_argument, "cannot serialize request (missing required fields?)");
  if (closed_) return core->fail(status_code::unavailable, "channel closed");
  if (at_capacity())
    return core->fail(status_code::resource_exhausted, "too many calls waiting on the channel");
  if (calls_.contains(core->id()) || streams_.contains(core->id()))
    return core->fail(status_code::resource_exhausted, "call id space exhausted");
  if (!wait_for_ready && watch_.published() == channel_state::transient_failure)
    return core->fail(status_code::unavailable, last_failure_);
  streams_.emplace(core->id(), open_stream{core, kNoEndpoint, wait_for_ready});
  core->arm_deadline();
  attach_waiting_streams();
  if (streams_.contains(core->id()) && streams_.at(core->id()).endpoint == kNoEndpoint) want_connections();
}

void channel_impl::end_stream_interception(const stream_interception& icpt, stream_core& core) {
  const auto bytes = core.payload_bytes();
  const call_outcome outcome{core.final_code(), core.final_message(), bytes.sent, bytes.received,
                             clock::now() - icpt.started};
  core.with_client_context([&](const client_context* context) {
    chain_.end(icpt.asked, client_call_info{icpt.method, context, true}, outcome);
  });
}

void channel_impl::on_stream_frame(std::size_t e, const frame::view& v,
                                   transport::received_message& message) {
  auto it = streams_.find(v.header.call_id);
  if (it == streams_.end() || it->second.endpoint != e) {
    if (v.header.call_id >= next_id_.load(std::memory_order_relaxed))
      protocol_violation(e, "stream frame for a stream never opened");
    return;
  }
  auto core = it->second.core;  // it may end (and leave streams_) inside on_frame
  core->on_frame(v, message);
}

}  // namespace rdmarpc::channel_detail
