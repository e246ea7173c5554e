#include "transport/rdma/rdma_connection.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <cstring>

#include "log/log.hpp"
#include "transport/rdma/cm_event_policy.hpp"
#include "verbs/error.hpp"

namespace rdmarpc::transport::rdma {
namespace {

// wr_id layout: receives carry the slot index; sends carry their sequence number with the top bit
// set. No pointers travel through wr_id.
constexpr std::uint64_t kSendBit = std::uint64_t{1} << 63;
constexpr int kPollBatch = 32;
// After the QP went to the error state, flushed WRs come back quickly; never wait longer.
constexpr std::chrono::milliseconds kDrainLimit{1000};

std::string describe_peer(rdma_cm_id* id) {
  const sockaddr* addr = rdma_get_peer_addr(id);
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr != nullptr && addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  } else if (addr != nullptr && addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
    return "rdma://[" + std::string(text) + "]:" + std::to_string(ntohs(rdma_get_dst_port(id)));
  }
  return "rdma://" + std::string(text) + ":" + std::to_string(ntohs(rdma_get_dst_port(id)));
}

errc errc_for_status(ibv_wc_status status) noexcept {
  switch (status) {
    case IBV_WC_RNR_RETRY_EXC_ERR: return errc::rnr_retry_exceeded;
    case IBV_WC_LOC_LEN_ERR:  // the peer sent more than a slot
    case IBV_WC_REM_INV_REQ_ERR: return errc::protocol_error;
    case IBV_WC_FATAL_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_PROT_ERR: return errc::device_error;
    default: return errc::connection_lost;  // retry exceeded (peer gone), flush, remote errors
  }
}

}  // namespace

rdma_connection::rdma_connection(boost::asio::any_io_executor ex, std::unique_ptr<qp_resources> resources,
                                 const connection_options& options, const wire::handshake& peer)
    : connection(std::min<std::size_t>(options.max_message_size, peer.max_message_size)),
      ex_(std::move(ex)),
      options_(options),
      peer_(peer),
      resources_(std::move(resources)),
      reactor_(ex_, *resources_, options.polling,
               spin_window(options.adaptive_spin, options.adaptive_spin_max), stats_.cq_wakeups),
      cm_pump_(ex_, resources_->channel()),
      drain_timer_(ex_),
      reassembly_timer_(ex_),
      credits_(peer.ring_depth, resources_->ring_depth()),
      reassembler_(options.max_message_size, std::min(peer.slot_size, resources_->slot_size())),
      remote_address_(describe_peer(resources_->id())),
      fragment_size_(std::min(peer.slot_size, resources_->slot_size())),
      ring_(resources_->send_memory_size()),
      large_threshold_(ring_.capacity() / 4),
      receives_(resources_->ring_depth()) {}

rdma_connection::~rdma_connection() {
  shutdown_resources();
}

void rdma_connection::start(std::shared_ptr<connection_handler> handler) {
  handler_ = std::move(handler);
  if (!life_.start()) {
    // Ended before start (close() or a failure): still tell the handler, exactly once.
    if (handler_) {
      boost::asio::post(
          ex_, [self = self(), h = std::move(handler_), reason = life_.reason()] { h->on_close(reason); });
    }
    return;
  }
  // Completions may already wait in the CQ (the peer can send as soon as it is established), and
  // an rdma_cm event (the peer's disconnect): both are read soon, never inside start().
  reactor_.start(self());
  boost::asio::post(ex_, [self = self()] { self->cm_pump_.start(self); });
  watch_device_events();
}

void rdma_connection::watch_device_events() {
  if (!options_.device_events) return;
  // Only the subscription stays: the connection must not keep the monitor (and its executor's
  // reader) alive, its owner (a server, a channel, main()) does.
  const auto monitor = std::move(options_.device_events);
  const rdma_cm_id* id = resources_->id();
  const device_event_target target{id->verbs, resources_->qp(), resources_->cq(), id->port_num};
  std::weak_ptr<rdma_connection> weak = self();
  try {
    device_events_ = monitor->subscribe(target, [weak, ex = ex_](errc reason) {
      boost::asio::post(ex, [weak, reason] {
        const auto self = weak.lock();
        if (!self || self->life_.is_shut_down()) return;
        self->fail(make_error_code(reason));  // the layer above logs the close reason
      });
    });
  } catch (const std::exception& e) {
    // Unwatched, the connection still ends on flushed completions and heartbeats.
    rdmarpc::logger()->warn("rdma {}: device events not watched: {}", remote_address_, e.what());
  }
}

// --- completions ---------------------------------------------------------------------------------

// Handlers run from here (deliver -> on_message) never throw through it: the rpc layer catches
// what user code throws and posts it to come out of run() later (complete_in_place in
// rpc/completion_op.hpp, the inline dispatch in rpc/channel.cpp's complete). Commits they make
// wait for after_completions, except the first commit of the batch's last completion
// (commit_reservation).
std::size_t rdma_connection::poll_completions() {
  in_poll_ = true;
  std::size_t handled = 0;
  std::array<ibv_wc, kPollBatch> wcs;
  for (;;) {
    if (life_.is_shut_down()) break;
    const int n = ibv_poll_cq(resources_->cq(), kPollBatch, wcs.data());
    if (n < 0) {
      fail(make_error_code(errc::device_error));
      break;
    }
    for (int i = 0; i < n; ++i) {
      // The batch's last completion: nothing behind it to share a doorbell with, so the first
      // commit its handler makes (a reply, the next call) goes out at once, before the handler's
      // own teardown and the batch's bookkeeping. That work then overlaps the peer's.
      post_first_commit_ = i + 1 == n && n < kPollBatch;
      handle_completion(wcs[static_cast<std::size_t>(i)]);
    }
    post_first_commit_ = false;
    handled += static_cast<std::size_t>(n);
    if (n < kPollBatch) break;
  }
  in_poll_ = false;
  // An empty poll (most polls of a busy or adaptive spin, the poll after arming the CQ) changed
  // nothing the bookkeeping looks at: what else changes it (releases, close, failures outside a
  // poll) runs its own. It still runs while the connection ends, and while messages wait in
  // committed_: a spin's polls send held (coalesced) commits without waiting for the doorbell's
  // turns, which come only when the spin yields.
  if (handled == 0 && committed_.empty() && !life_.has_ended()) return 0;
  after_completions();
  return handled;
}

inline void rdma_connection::after_completions() {
  if (life_.is_shut_down()) return;
  if (sent_completed()) reclaim_sent();
  // What the batch's handlers committed and still waits (deferred while in_poll_) leaves first, in
  // one chained post, and only then do the released slots go back: replies are not behind the
  // reposts.
  if (life_.is_sending() && !committed_.empty()) post_committed();
  // The rest is called only when it has work: in the steady state (nothing left committed, no
  // credit update due, not closing) each would return at its first line, and those calls came to
  // ~180 instructions a call (callgrind over rdma, client + server, two runs each: 8e5213d).
  if (reposts_waiting()) flush_reposts();
  if (life_.is_sending() && (!committed_.empty() || credits_.wants_credit_update())) pump();
  if (life_.is_closing()) try_finish_close();
  if (life_.current() == connection_lifecycle::state::draining) check_drained();
}

inline void rdma_connection::handle_completion(const ibv_wc& wc) {
  const bool is_send = (wc.wr_id & kSendBit) != 0;
  if (is_send) {
    // RC completes in order: this WR done means every earlier one is too (signaled or not).
    completed_seq_ = std::max(completed_seq_, (wc.wr_id & ~kSendBit) + 1);
  } else {
    receives_.on_completion();
  }
  if (wc.status != IBV_WC_SUCCESS) {
    if (life_.has_ended()) return;  // flushed during teardown: reclaimed quietly
    if (wc.status == IBV_WC_RNR_RETRY_EXC_ERR) ++stats_.rnr_errors;
    const auto detail = verbs::make_wc_error(wc.status);
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      rdmarpc::logger()->debug("rdma {}: work request flushed", remote_address_);
    } else {
      rdmarpc::logger()->warn("rdma {}: {} completion failed: {}", remote_address_,
                              is_send ? "send" : "receive", detail.message());
    }
    fail(make_error_code(errc_for_status(wc.status)));
    return;
  }
  if (!is_send) handle_receive(wc);
}

inline void rdma_connection::handle_receive(const ibv_wc& wc) {
  ordering_.received(resources_->qp());
  const auto slot = static_cast<std::uint32_t>(wc.wr_id);
  if (life_.has_ended()) return;  // the slot is not reposted: the QP is going away
  if ((wc.wc_flags & IBV_WC_WITH_IMM) == 0 || wc.opcode != IBV_WC_RECV) {
    rdmarpc::logger()->warn("rdma {}: message without immediate data", remote_address_);
    fail(make_error_code(errc::protocol_error));
    return;
  }
  const auto imm = wire::decode_imm(ntohl(wc.imm_data));
  if (!imm) {
    rdmarpc::logger()->warn("rdma {}: malformed immediate data", remote_address_);
    fail(make_error_code(errc::protocol_error));
    return;
  }
  if (!credits_.on_peer_announced(imm->credits) && !send_without_credits_) {
    rdmarpc::logger()->warn("rdma {}: peer announced {} credits, more than its ring", remote_address_,
                            imm->credits);
    fail(make_error_code(errc::protocol_error));
    return;
  }
  ++stats_.peer_activity;                       // a fragment or a credit update is a sign of life too
  if (imm->goodbye) life_.peer_said_goodbye();  // its rdma_disconnect follows
  // Nothing is delivered after close() (the user asked to stop); credits above still count.
  if (imm->credit_only || !life_.is_open()) {
    receives_.release(slot);
    return;
  }
  const std::span<const std::byte> bytes = resources_->received(slot, wc.byte_len);
  switch (reassembler_.feed(imm->kind, bytes)) {
    case wire::reassembler::outcome::whole:
      if (bytes.size() > options_.max_message_size) break;
      deliver(bytes, slot);
      return;
    case wire::reassembler::outcome::need_more:
      receives_.release(slot);
      if (imm->kind == wire::fragment::first) watch_reassembly();
      return;
    case wire::reassembler::outcome::complete:
      receives_.release(slot);
      deliver(reassembler_.take());
      return;
    case wire::reassembler::outcome::protocol_error: break;
  }
  receives_.release(slot);
  rdmarpc::logger()->warn("rdma {}: malformed fragment sequence or oversized message", remote_address_);
  fail(make_error_code(errc::protocol_error));
}

// Both run from the completion drain loop, never inside a user call into the transport.
inline void rdma_connection::deliver(std::span<const std::byte> bytes, std::uint64_t slot) {
  ++stats_.messages_received;
  stats_.bytes_received += bytes.size();
  if (handler_) {
    handler_->on_message(received_message(bytes, *this, slot));
  } else {
    release_message(slot);
  }
}

void rdma_connection::deliver(std::vector<std::byte> whole) {
  ++stats_.messages_received;
  stats_.bytes_received += whole.size();
  if (handler_) handler_->on_message(received_message(std::move(whole)));
}

void rdma_connection::on_cm_event(verbs::cm_event event) {
  if (life_.is_shut_down()) return;
  const rdma_cm_event_type type = event->event;
  event.reset();  // acknowledged: nothing of the event is needed beyond its type
  switch (type) {
    case RDMA_CM_EVENT_DISCONNECTED:
      // Take in what arrived before the disconnect (the peer's last messages, its goodbye).
      if (!in_poll_ && !life_.has_ended()) poll_completions();
      fail(make_error_code(life_.disconnect_reason()));
      break;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
    case RDMA_CM_EVENT_ESTABLISHED: break;
    default:
      if (const auto reason = established_end_reason(type)) {
        // The layer above logs the close reason.
        rdmarpc::logger()->debug("rdma {}: {}: closing the connection", remote_address_,
                                 rdma_event_str(type));
        fail(make_error_code(*reason));
      } else {
        rdmarpc::logger()->debug("rdma {}: ignoring {}", remote_address_, rdma_event_str(type));
      }
      break;
  }
}

bool rdma_connection::on_cm_error(const boost::system::error_code& ec) {
  rdmarpc::logger()->warn("rdma {}: rdma_get_cm_event: {}", remote_address_, ec.message());
  fail(make_error_code(errc::device_error));
  return false;
}

// --- send path ---------------------------------------------------------------------------------

send_reservation rdma_connection::reserve_now(std::size_t bytes, boost::system::error_code& ec) {
  // (Larger than max_message_size(), which is the peer's limit if smaller than ours, never gets
  // here: try_reserve refuses it first.)
  if (!life_.is_open()) [[unlikely]] {
    ec = errc::not_connected;
    return {};
  }
  if (bytes > large_threshold_) return reserve_large(bytes, ec);
  const auto a = ring_.allocate(bytes);
  if (!a) {
    ec = boost::asio::error::would_block;
    return {};
  }
  return send_reservation(this, a->id, std::span<std::byte>(resources_->send_memory() + a->offset, bytes));
}

send_reservation rdma_connection::reserve_large(std::size_t bytes, boost::system::error_code& ec) {
  if (large_bytes_ > 0 && large_bytes_ + bytes > options_.send_queue_bytes) {
    ec = boost::asio::error::would_block;
    return {};
  }
  const auto a = ring_.allocate(0);  // an entry only, to keep its place in the order of release
  if (!a) {
    ec = boost::asio::error::would_block;
    return {};
  }
  // Runs from room_freed() too, inside noexcept paths: failures become an error code.
  std::byte* data = nullptr;
  try {
    large_buffer buffer{verbs::mapped_pages(bytes), {}, bytes};
    buffer.mr = resources_->register_send_memory(buffer.memory.get(), bytes);
    data = buffer.memory.get();
    large_.emplace(a->id, std::move(buffer));
  } catch (const std::exception& e) {
    ring_.release(a->id);
    ec = boost::asio::error::would_block;  // the one error a caller does not take for the end
    // Our own large buffers in flight may be what the system's limit is full of: wait for them.
    if (large_bytes_ > 0) return {};
    // Nothing of ours to wait for: the message can never go, so the connection ends and tells
    // everyone why. Posted when it can be: this may run inside room_freed's grants.
    rdmarpc::logger()->warn("rdma {}: cannot register a {}-byte send buffer: {}; ending the connection",
                            remote_address_, bytes, e.what());
    const auto reason = make_error_code(errc::registered_memory_exhausted);
    try {
      boost::asio::post(ex_, [self = self(), reason] { self->fail(reason); });
    } catch (...) {
      // No memory even for that: the next grant tries again (failing here could throw too).
    }
    return {};
  }
  large_bytes_ += bytes;
  return send_reservation(this, a->id, std::span<std::byte>(data, bytes));
}

void rdma_connection::commit_reservation(std::uint64_t token, std::size_t size, bool coalesce) noexcept {
  if (!life_.is_open()) {  // closing or ended since the reservation: dropped
    drop_entry(token);
    return;
  }
  committed_message m{token, nullptr, 0, size, wire::fragment_count(size, fragment_size_), false};
  const auto it = large_.empty() ? large_.end() : large_.find(token);  // no hash while none is large
  if (it != large_.end()) {
    m.data = it->second.memory.get();
    m.lkey = it->second.mr->lkey;
    m.large = true;
  } else {
    m.data = resources_->send_memory() + ring_.offset_of(token);
    m.lkey = resources_->send_lkey();
  }
  ++stats_.messages_sent;
  stats_.bytes_sent += size;
  stats_.fragments_sent += m.fragments;
  // The common case, a one-fragment message with nothing committed ahead of it that goes now (see
  // below): straight into the batch, never through committed_.
  if (!coalesce && committed_.empty() && m.fragments == 1 && (!in_poll_ || post_first_commit_)) {
    post_first_commit_ = false;
    if (post_next_fragment(m)) {
      posted_.push_back(posted_message{posted_seq_ - 1, m.id});
      flush_sends();
      return;
    }
    // No room or credit now: it waits first in line. (Had the connection failed, its entry goes.)
    if (m.next == 0) {
      if (life_.has_ended()) return drop_entry(m.id);
      committed_.push_back(m);
    }
    return;
  }
  committed_.push_back(m);
  // Posting runs no user code: the WRs go out now, in commit order (behind any still waiting, and
  // taking held ones along), or with the doorbell's turn.
  if (coalesce) return hold_doorbell();
  // Committed from inside a completion batch (a reply, or the next call, from a handler that the
  // batch ran): the batch's end posts everything committed meanwhile as one chained post
  // (after_completions), as tcp writes a read's replies in one write. One doorbell (on rxe, one
  // syscall) per batch instead of one per message. Except the first commit of the batch's last
  // completion, which takes everything committed before it along at once, credits and send-queue
  // room permitting (poll_completions).
  if (in_poll_) {
    if (!post_first_commit_) return;
    post_first_commit_ = false;
    return post_committed();
  }
  if (committed_.size() == 1 || held_commits() > 0) post_committed();
}

void rdma_connection::cancel_reservation(std::uint64_t token) noexcept {
  drop_entry(token);
  room_freed();
}

void rdma_connection::drop_entry(std::uint64_t id) noexcept {
  if (!large_.empty()) {
    if (auto it = large_.find(id); it != large_.end()) {
      large_bytes_ -= it->second.bytes;
      large_.erase(it);
    }
  }
  ring_.release(id);
}

void rdma_connection::post_committed() {
  while (!committed_.empty() && !life_.has_ended()) {
    committed_message& m = committed_.front();
    while (m.next < m.fragments) {
      if (!post_next_fragment(m)) return;
    }
    posted_.push_back(posted_message{posted_seq_ - 1, m.id});
    committed_.pop_front();
  }
  flush_sends();  // on failure the connection has ended; callers check life_
}

inline bool rdma_connection::post_next_fragment(committed_message& m) {
  if (!sq_has_room()) {
    flush_sends();
    return false;
  }
  std::uint32_t announce = 0;
  if (!acquire_data_credit(announce)) {
    if (!stalled_) {
      stalled_ = true;
      ++stats_.credit_stalls;
    }
    flush_sends();
    return false;
  }
  stalled_ = false;
  const std::size_t offset = m.next * fragment_size_;
  const auto length = static_cast<std::uint32_t>(std::min<std::size_t>(fragment_size_, m.size - offset));
  const auto imm = wire::encode_imm(
      {static_cast<std::uint16_t>(announce), wire::fragment_kind(m.next, m.fragments), false});
  ++m.next;
  // A large message's buffer is freed by its own completion: always ask for it.
  prepare_send(m.data + offset, m.lkey, length, imm, false, m.large && m.next == m.fragments);
  return batch_size_ < kPostBatch || flush_sends();
}

bool rdma_connection::post_credit_only(std::uint32_t imm) {
  prepare_send(nullptr, 0, 0, imm, true, false);
  return flush_sends();
}

inline void rdma_connection::prepare_send(const std::byte* data, std::uint32_t lkey, std::uint32_t length,
                                          std::uint32_t imm, bool credit_only, bool must_signal) {
  const std::uint64_t seq = posted_seq_;
  const bool fills_sq = seq + 1 - completed_seq_ >= resources_->send_buffers();
  // Signal every k-th send; the one that fills the send queue, so its room can always be
  // reclaimed; one at least every eighth of the ring, so unobserved completions can never pin
  // more than that (every ring message is at most a quarter of it, so a waiting reservation always
  // fits once the rest drained); everything while closing, so the flush can be observed.
  // In ring space: each entry starts on a cache line, so a small message pins a whole line.
  if (!credit_only) unsignaled_bytes_ += send_ring::footprint(length);
  const bool signaled = must_signal || ++since_signal_ >= options_.signal_every || fills_sq ||
                        unsignaled_bytes_ >= ring_.capacity() / 8 || life_.is_closing();
  if (signaled) {
    since_signal_ = 0;
    unsignaled_bytes_ = 0;
  }

  ibv_sge& sge = batch_sges_[batch_size_];
  sge = ibv_sge{reinterpret_cast<std::uintptr_t>(data), length, lkey};
  // Only the fields a send uses are written: the rest of every batch WR stays as zero-initialized
  // (clearing all 128 bytes per send showed in callgrind).
  ibv_send_wr& wr = batch_wrs_[batch_size_];
  wr.next = nullptr;
  wr.wr_id = kSendBit | seq;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(imm);
  wr.sg_list = length > 0 ? &sge : nullptr;
  wr.num_sge = length > 0 ? 1 : 0;
  unsigned flags = 0;
  if (signaled) flags |= IBV_SEND_SIGNALED;
  if (length > 0 && length <= resources_->max_inline()) flags |= IBV_SEND_INLINE;
  wr.send_flags = flags;
  if (batch_size_ > 0) batch_wrs_[batch_size_ - 1].next = &wr;
  ++batch_size_;
  // Counted as posted now: the SQ room is taken. Should the post fail, the connection ends and
  // nothing counts any more.
  ++posted_seq_;
  if (credit_only) ++stats_.credit_only_messages;
}

inline bool rdma_connection::flush_sends() {
  if (batch_size_ == 0) return !life_.has_ended();
  ibv_send_wr* bad = nullptr;
  ordering_.sending(resources_->qp());
  const int rc = ibv_post_send(resources_->qp(), batch_wrs_.data(), &bad);
  batch_size_ = 0;
  if (rc != 0) [[unlikely]]
    return post_failed(rc);
  return true;
}

bool rdma_connection::post_failed(int rc) {
  rdmarpc::logger()->warn("rdma {}: ibv_post_send: {}", remote_address_, std::strerror(rc));
  fail(make_error_code(errc::connection_lost));
  return false;
}

void rdma_connection::reclaim_sent() {
  bool freed = false;
  while (sent_completed()) {
    drop_entry(posted_.front().id);
    posted_.pop_front();
    freed = true;
  }
  if (freed && life_.is_open()) room_freed();
}

void rdma_connection::pump() {
  if (!life_.is_sending()) return;
  post_committed();
  if (life_.has_ended()) return;
  maybe_send_credit_update();
}

void rdma_connection::maybe_send_credit_update() {
  // Credits ride on data when data can go; otherwise (idle, or stalled for credits ourselves) an
  // update spends a credit the window reserves for exactly this, so two stalled peers still talk.
  if (!credits_.wants_credit_update() || !sq_has_room()) return;
  if (!committed_.empty() && credits_.can_send_data()) return;
  const std::uint32_t announce = credits_.take_for_credit_update();
  post_credit_only(wire::encode_imm({static_cast<std::uint16_t>(announce), wire::fragment::whole, true}));
}

// --- receive path ------------------------------------------------------------------------------

void rdma_connection::release_message(std::uint64_t token) noexcept {
  if (life_.has_ended()) return;  // the QP is gone or going: nothing to repost
  receives_.release(static_cast<std::uint32_t>(token));
  if (in_poll_ || !receives_.repost_due()) return;  // at the end of the completion batch, or once due
  if (receives_.batch_waiting()) {
    flush_reposts();
    pump();
    return;
  }
  // Due only because the queue is down to half the ring: the application held many messages and
  // may now release them one after another. One post after this handler reposts them together.
  if (!repost_scheduled_) {
    repost_scheduled_ = true;
    boost::asio::post(ex_, [self = self()] {
      self->repost_scheduled_ = false;
      if (self->life_.is_shut_down()) return;
      self->flush_reposts();
      self->pump();
    });
  }
}

// Posts the released slots back once they are due (receive_ring::repost_due).
void rdma_connection::flush_reposts() {
  if (!receives_.has_pending() || life_.has_ended()) {
    receives_.drop_pending();
    return;
  }
  if (!receives_.repost_due()) return;
  if (const auto ec = resources_->post_receives(receives_.pending()); ec) {
    rdmarpc::logger()->warn("rdma {}: ibv_post_recv: {}", remote_address_, ec.message());
    receives_.drop_pending();
    fail(make_error_code(errc::connection_lost));
    return;
  }
  const std::uint32_t n = receives_.mark_posted();
  stats_.reposts += n;
  credits_.on_local_reposted(n);
}

// --- ending ------------------------------------------------------------------------------------

void rdma_connection::close() {
  switch (life_.close()) {
    case connection_lifecycle::close_action::end_now: return fail(make_error_code(errc::closed_locally));
    case connection_lifecycle::close_action::none: return;
    case connection_lifecycle::close_action::flush: break;
  }
  end_reservations(make_error_code(errc::closed_locally));
  // Bound the flush: a peer that never returns credits must not keep us open forever.
  drain_timer_.expires_after(options_.connect_timeout);
  drain_timer_.async_wait([self = self()](const boost::system::error_code& ec) {
    if (!ec && self->life_.is_closing()) self->fail(make_error_code(errc::closed_locally));
  });
  boost::asio::post(ex_, [self = self()] {
    self->pump();
    self->try_finish_close();
  });
}

void rdma_connection::try_finish_close() {
  if (!life_.is_closing() || !committed_.empty()) return;
  if (life_.current() == connection_lifecycle::state::flushing) {
    // The last message: tells the peer this is close(), not a crash. It is signaled (everything is
    // while closing) and completes after every WR before it, so its completion means all is
    // flushed. It spends one credit like any update (reserved ones included); with none left, the
    // peer's next announcement brings us back here via pump(). The drain timer bounds the wait.
    if (credits_.credits() >= 1 && sq_has_room()) {
      const std::uint32_t announce = credits_.take_for_credit_update();
      life_.goodbye_posted();
      post_credit_only(
          wire::encode_imm({static_cast<std::uint16_t>(announce), wire::fragment::whole, true, true}));
    }
    return;
  }
  if (posted_seq_ == completed_seq_) fail(make_error_code(errc::closed_locally));
}

// A fragmented message must be complete within options_.reassembly_timeout of its first fragment
// (heartbeats cannot tell: until it is, nothing reaches the rpc layer). One timer wait per
// fragmented message; a message that completes in time just leaves it to expire unheard.
void rdma_connection::watch_reassembly() {
  const std::uint64_t message = ++fragmented_messages_;
  reassembly_timer_.expires_after(options_.reassembly_timeout);
  reassembly_timer_.async_wait([self = self(), message](const boost::system::error_code& ec) {
    if (ec || self->life_.has_ended() || !self->reassembler_.in_progress() ||
        self->fragmented_messages_ != message)
      return;
    rdmarpc::logger()->warn(
        "rdma {}: a fragmented message was not complete within reassembly_timeout ({} ms)",
        self->remote_address_, self->options_.reassembly_timeout.count());
    self->fail(make_error_code(errc::protocol_error));
  });
}

void rdma_connection::fail(boost::system::error_code reason) {
  const auto action = life_.end(reason);
  if (action == connection_lifecycle::end_action::ignored) return;
  reason = life_.reason();  // closed_locally once close() was called
  rdmarpc::logger()->debug("rdma {}: connection ended: {}", remote_address_, reason.message());
  // Moves the QP to the error state: every posted WR comes back flushed and is reclaimed below.
  rdma_disconnect(resources_->id());
  // Committed messages not yet (fully) posted are dropped; buffers that posted WRs may still read
  // stay until those are flushed (reclaim_sent) or the connection is destroyed.
  committed_.for_each([this](const committed_message& m) {
    if (m.next == 0) drop_entry(m.id);
  });
  committed_.clear();
  end_reservations(reason);
  if (handler_) {
    // A copy, reset after the post: were the post to throw, handler_ would still own the handler,
    // which may be inside on_message (delivery calls it through handler_).
    boost::asio::post(ex_, [self = self(), h = handler_, reason] { h->on_close(reason); });
    handler_.reset();
  }
  if (action == connection_lifecycle::end_action::shut_down_now) {
    shutdown_resources();
    return;
  }
  drain_timer_.cancel();
  drain_timer_.expires_after(kDrainLimit);
  drain_timer_.async_wait([self = self()](const boost::system::error_code& ec) {
    if (ec || self->life_.is_shut_down()) return;
    rdmarpc::logger()->debug("rdma {}: {} receives and {} sends not flushed; destroying the QP anyway",
                             self->remote_address_, self->receives_.posted(),
                             self->posted_seq_ - self->completed_seq_);
    self->shutdown_resources();
  });
  // Draining continues in the completion handler; check_drained() finishes once all came back.
  if (!in_poll_) boost::asio::post(ex_, [self = self()] { self->check_drained(); });
}

void rdma_connection::check_drained() {
  if (life_.current() != connection_lifecycle::state::draining) return;
  if (receives_.posted() == 0 && posted_seq_ == completed_seq_) shutdown_resources();
}

void rdma_connection::shutdown_resources() noexcept {
  if (!life_.shut_down()) return;
  drain_timer_.cancel();
  reassembly_timer_.cancel();
  // The fds belong to the verbs objects: let go of them (cancelling waits), never close them.
  reactor_.stop();
  cm_pump_.stop();
  device_events_.reset();  // its QP and CQ pointers may be reused once they are destroyed
  if (resources_) resources_->destroy_queue_pair();
}

}  // namespace rdmarpc::transport::rdma
