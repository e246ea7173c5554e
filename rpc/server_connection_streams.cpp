// server_connection_impl's streams: opening, routing their frames, ending them
// (server_connection_impl.hpp).
#include "rpc/server_connection_impl.hpp"

namespace rdmarpc::server_connection_detail {

void connection_impl::fail_streams(const std::string& why) {
  std::vector<std::shared_ptr<stream_core>> streams;
  for (auto& [id, s] : streams_) streams.push_back(s->stream);
  for (auto& core : streams) core->fail(status_code::unavailable, why);
}

void connection_impl::on_stream_open(const frame::view& v) {
  const std::uint32_t id = v.header.call_id;
  if (id_in_use(id)) return violation("duplicate call id");
  highest_id_ = std::max(highest_id_, id);
  metadata md;
  stream_window_size client_window = kDefaultStreamWindow;
  const method_entry* m = nullptr;
  interception icpt;
  if (!admit_request(v, md, &client_window, m, icpt)) return;
  // A refusal from here on is an end the interceptors are told of.
  const auto refuse_admitted = [&](status_code code, const std::string& why) {
    refuse_stream(id, code, why);
    icpt.drop_initial();
    end_interception(icpt.asked, icpt.started, m, md, true, code, why, 0, 0);
  };
  if (client_gone_away_) return refuse_admitted(status_code::unavailable, "server shutting down");
  if (at_in_flight_limit()) return refuse_admitted(status_code::resource_exhausted, in_flight_refusal);
  if (m == nullptr)
    return refuse_admitted(status_code::unimplemented,
                           "unknown method id " + std::to_string(v.header.method_id));
  std::shared_ptr<server_stream_call> call = m->svc->new_stream_call(m->index);
  if (!call)
    return refuse_admitted(status_code::unimplemented,
                           std::string(m->full_name) + " is not a streaming method");
  const auto deadline = v.header.has_timeout() ? clock::now() + std::chrono::microseconds(v.header.timeout_us)
                                               : clock::time_point::max();
  auto rec = std::make_unique<active_stream>(ex_, m->full_name, peer_, deadline, std::move(md));
  icpt.add_initial_to(rec->ctx);
  rec->method = m;
  rec->intercepted = icpt.asked;
  rec->started = icpt.started;
  stream_core::settings s;
  s.side = stream_state::side::server;
  s.id = id;
  const auto own = normalised(opts_.stream_window);
  s.receive_window.bytes = std::max(own.bytes, kInitialStreamWindow.bytes);
  s.receive_window.messages = std::max(own.messages, kInitialStreamWindow.messages);
  s.send_window = client_window;
  rec->stream = std::make_shared<stream_core>(ex_, weak_from_this(), s);
  rec->call = call;
  rec->serial = ++serial_;
  active_stream& st = *rec;
  streams_.emplace(id, std::move(rec));
  server_->call_started();
  auto core = st.stream;
  core->accept(&st.ctx, deadline);
  core->attach(conn_);
  const std::uint64_t key = std::uint64_t{st.serial} << 32 | id;
  try {
    call->start(st.ctx, core, server_done(server_done::lent, *this, key), st.signal.slot());
  } catch (...) {
    on_call_done(key, std::current_exception());
  }
}

void connection_impl::on_stream_frame(const frame::view& v, transport::received_message& message) {
  auto it = streams_.find(v.header.call_id);
  if (it == streams_.end()) {
    if (v.header.call_id > highest_id_) violation("stream frame for a stream never opened");
    return;  // a stream that ended here (or was refused): the frame crossed its end
  }
  auto core = it->second->stream;  // the stream may end (and its record go) inside on_frame
  const method_entry& m = *it->second->method;
  if (v.header.kind == frame::kind::stream_message && v.payload.size() > m.max_request_bytes &&
      !core->ended()) [[unlikely]] {
    const std::string why = too_large(m, v.payload.size());
    log_limit_once(request_size_limit, why);
    return core->reset(status_code::resource_exhausted, why);  // unparsed; the handler is cancelled
  }
  core->on_frame(v, message);
}

void connection_impl::on_stream_done(
    std::unordered_map<std::uint32_t, std::unique_ptr<active_stream>>::iterator it, std::exception_ptr e) {
  active_stream& st = *it->second;
  if (st.done) return;
  st.done = true;
  server_->call_finished();
  if (st.ended) {
    streams_.erase(it);
    if (client_gone_away_) close_if_drained();
    return;
  }
  if (e) set_status_from(st.ctx, e);
  auto core = st.stream;
  core->finish_server(st.ctx.status(), st.ctx.status_message());  // may end the record
}

void connection_impl::stream_ended(std::uint32_t id, status_code code) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  active_stream& st = *it->second;
  st.ended = true;
  if (st.intercepted != 0) {
    const auto bytes = st.stream->payload_bytes();
    end_interception(
        std::exchange(st.intercepted, 0), st.started, st.method, st.ctx.client_metadata(), true, code,
        code == status_code::ok ? std::string_view() : std::string_view(st.stream->final_message()),
        bytes.received, bytes.sent);
  }
  if (st.done) {
    streams_.erase(it);
    if (client_gone_away_) close_if_drained();
    return;
  }
  (void)code;
  if (!st.ctx.is_cancelled()) {
    st.ctx.mark_cancelled();
    st.signal.emit(boost::asio::cancellation_type::terminal);
  }
}

}  // namespace rdmarpc::server_connection_detail
