#include "cm_pingpong/pingpong.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cm_pingpong/payload.hpp"

namespace cm_pingpong {
namespace {

using clock = std::chrono::steady_clock;

// ---- RAII over the handful of rdma_cm / verbs objects one connection needs --------------------
template <auto Destroy>
struct destroyer {
  template <typename T>
  void operator()(T* p) const noexcept {
    (void)Destroy(p);
  }
};
using event_channel_ptr = std::unique_ptr<rdma_event_channel, destroyer<rdma_destroy_event_channel>>;
using cm_id_ptr = std::unique_ptr<rdma_cm_id, destroyer<rdma_destroy_id>>;
using pd_ptr = std::unique_ptr<ibv_pd, destroyer<ibv_dealloc_pd>>;
using comp_channel_ptr = std::unique_ptr<ibv_comp_channel, destroyer<ibv_destroy_comp_channel>>;
using cq_ptr = std::unique_ptr<ibv_cq, destroyer<ibv_destroy_cq>>;
using mr_ptr = std::unique_ptr<ibv_mr, destroyer<ibv_dereg_mr>>;

// The QP belongs to a cm_id (rdma_create_qp/rdma_destroy_qp), so it is held through the id.
class qp_guard {
 public:
  qp_guard() = default;
  explicit qp_guard(rdma_cm_id* id) : id_(id) {}
  qp_guard(const qp_guard&) = delete;
  qp_guard& operator=(const qp_guard&) = delete;
  ~qp_guard() {
    if (id_ != nullptr) rdma_destroy_qp(id_);
  }

 private:
  rdma_cm_id* id_ = nullptr;
};

[[noreturn]] void fail_errno(const std::string& what, int err) {
  throw pingpong_error(what + " failed: " + std::strerror(err));
}

void check_call(int rc, const char* what) {
  if (rc != 0) fail_errno(what, rc > 0 ? rc : errno);  // ibv_* return errno, rdma_* set it
}

template <typename T>
T* check_ptr(T* p, const char* what) {
  if (p == nullptr) fail_errno(what, errno);
  return p;
}

// Milliseconds left until deadline, for poll(); throws once the deadline has passed.
int remaining_ms(clock::time_point deadline, const std::string& waiting_for) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
  if (left <= 0) throw pingpong_error("timed out waiting for " + waiting_for);
  return static_cast<int>(left);
}

// Blocks until fd is readable or the deadline passes (throws then).
void wait_readable(int fd, clock::time_point deadline, const std::string& waiting_for) {
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    const int n = ::poll(&pfd, 1, remaining_ms(deadline, waiting_for));
    if (n > 0) return;
    if (n < 0 && errno != EINTR) fail_errno("poll while waiting for " + waiting_for, errno);
  }
}

// ---- rdma_cm events ----------------------------------------------------------------------------
struct cm_event {
  rdma_cm_event_type type;
  rdma_cm_id* id;  // for CONNECT_REQUEST: the new connection's id, now owned by the caller
  int status;
};

// The next event on ch, acknowledged (the fields needed are copied out first).
cm_event next_cm_event(rdma_event_channel* ch, std::chrono::milliseconds timeout, const std::string& what) {
  wait_readable(ch->fd, clock::now() + timeout, what);
  rdma_cm_event* ev = nullptr;
  check_call(rdma_get_cm_event(ch, &ev), "rdma_get_cm_event");
  const cm_event copy{ev->event, ev->id, ev->status};
  rdma_ack_cm_event(ev);
  return copy;
}

cm_event expect_cm_event(rdma_event_channel* ch, rdma_cm_event_type want, std::chrono::milliseconds timeout) {
  const cm_event ev = next_cm_event(ch, timeout, rdma_event_str(want));
  if (ev.type != want) {
    std::string msg = std::string("expected rdma_cm event ") + rdma_event_str(want) + ", got " +
                      rdma_event_str(ev.type) + " (status " + std::to_string(ev.status) + ")";
    if (ev.type == RDMA_CM_EVENT_REJECTED) msg += "; is the server listening on that address and port?";
    if (ev.type == RDMA_CM_EVENT_CONNECT_REQUEST) rdma_destroy_id(ev.id);  // not ours to keep
    throw pingpong_error(msg);
  }
  return ev;
}

sockaddr_in make_ipv4(const options& opts) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(opts.port);
  if (inet_pton(AF_INET, opts.address.c_str(), &sa.sin_addr) != 1) {
    throw pingpong_error("'" + opts.address + "' is not an IPv4 address");
  }
  return sa;
}

rdma_conn_param connection_parameters() {
  rdma_conn_param p{};
  p.retry_count = 7;
  // A receive is always posted before the peer can send (see the loops), so "receiver not ready"
  // is a bug: with rnr_retry_count 0 it fails at once instead of stalling.
  p.rnr_retry_count = 0;
  return p;
}

// ---- one RC connection's verbs resources: a send buffer, a receive buffer, one CQ ------------
class rc_endpoint {
 public:
  rc_endpoint(rdma_cm_id* id, std::size_t message_size, std::chrono::milliseconds timeout)
      : size_(message_size), timeout_(timeout), buffer_(2 * message_size) {
    if (id->verbs == nullptr) throw pingpong_error("rdma_cm id has no device (address not resolved?)");
    pd_.reset(check_ptr(ibv_alloc_pd(id->verbs), "ibv_alloc_pd"));
    channel_.reset(check_ptr(ibv_create_comp_channel(id->verbs), "ibv_create_comp_channel"));
    cq_.reset(check_ptr(ibv_create_cq(id->verbs, 4, nullptr, channel_.get(), 0), "ibv_create_cq"));
    mr_.reset(check_ptr(ibv_reg_mr(pd_.get(), buffer_.data(), buffer_.size(), IBV_ACCESS_LOCAL_WRITE),
                        "ibv_reg_mr"));
    ibv_qp_init_attr attr{};
    attr.send_cq = cq_.get();
    attr.recv_cq = cq_.get();
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = 1;  // strict ping-pong: one message in flight per direction
    attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.sq_sig_all = 1;
    check_call(rdma_create_qp(id, pd_.get(), &attr), "rdma_create_qp");
    qp_ = std::make_unique<qp_guard>(id);
    qp_num_ = id->qp->qp_num;
    qp_ptr_ = id->qp;
  }

  std::span<std::byte> send_buffer() { return {buffer_.data(), size_}; }
  std::span<const std::byte> recv_buffer() const { return {buffer_.data() + size_, last_recv_len_}; }

  void post_recv() {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer_.data() + size_), static_cast<std::uint32_t>(size_),
                mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = kRecvSlot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    check_call(ibv_post_recv(qp_ptr_, &wr, &bad), "ibv_post_recv");
    ++recvs_posted_;
  }

  void post_send() {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buffer_.data()), static_cast<std::uint32_t>(size_),
                mr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kSendSlot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    check_call(ibv_post_send(qp_ptr_, &wr, &bad), "ibv_post_send");
    ++sends_posted_;
  }

  // Waits for the outstanding receive; returns its contents (byte_len bytes).
  std::span<const std::byte> wait_recv() {
    poll_until([this] { return recvs_done_ == recvs_posted_; }, "a receive completion");
    return recv_buffer();
  }
  void wait_send() {
    poll_until([this] { return sends_done_ == sends_posted_; }, "a send completion");
  }

 private:
  static constexpr std::uint64_t kRecvSlot = 0;  // wr_id names a buffer, never a pointer
  static constexpr std::uint64_t kSendSlot = 1;

  template <typename Done>
  void poll_until(Done done, const char* what) {
    const auto deadline = clock::now() + timeout_;
    bool armed = false;
    while (!done()) {
      if (drain() > 0) continue;
      if (!armed) {
        // Arm, then poll once more: a completion that arrived before arming raises no event.
        check_call(ibv_req_notify_cq(cq_.get(), 0), "ibv_req_notify_cq");
        armed = true;
        continue;
      }
      wait_readable(channel_->fd, deadline, what);
      ibv_cq* cq = nullptr;
      void* ctx = nullptr;
      check_call(ibv_get_cq_event(channel_.get(), &cq, &ctx), "ibv_get_cq_event");
      ibv_ack_cq_events(cq, 1);  // every event is acked, so destroying the CQ cannot block
      armed = false;
    }
  }

  int drain() {
    ibv_wc wc[4];
    const int n = ibv_poll_cq(cq_.get(), 4, wc);
    if (n < 0) throw pingpong_error("ibv_poll_cq failed");
    for (int i = 0; i < n; ++i) {
      const bool is_recv = wc[i].wr_id == kRecvSlot;
      if (wc[i].status != IBV_WC_SUCCESS) {
        throw pingpong_error(std::string(is_recv ? "receive" : "send") + " completion failed: " +
                             ibv_wc_status_str(wc[i].status) + " (qp " + std::to_string(qp_num_) + ")");
      }
      if (is_recv) {
        last_recv_len_ = wc[i].byte_len;
        ++recvs_done_;
      } else {
        ++sends_done_;
      }
    }
    return n;
  }

  std::size_t size_;
  std::chrono::milliseconds timeout_;
  // Members are destroyed bottom-up: QP, MR, CQ, channel, PD, then the memory the MR covered.
  std::vector<std::byte> buffer_;  // [send | recv], one MR
  pd_ptr pd_;
  comp_channel_ptr channel_;
  cq_ptr cq_;
  mr_ptr mr_;
  std::unique_ptr<qp_guard> qp_;
  ibv_qp* qp_ptr_ = nullptr;
  std::uint32_t qp_num_ = 0;
  std::size_t last_recv_len_ = 0;
  std::uint64_t recvs_posted_ = 0, recvs_done_ = 0, sends_posted_ = 0, sends_done_ = 0;
};

event_channel_ptr make_channel() {
  return event_channel_ptr(check_ptr(rdma_create_event_channel(), "rdma_create_event_channel"));
}

cm_id_ptr make_id(rdma_event_channel* ch) {
  rdma_cm_id* id = nullptr;
  check_call(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), "rdma_create_id");
  return cm_id_ptr(id);
}

void check_size(std::span<const std::byte> got, std::size_t want, std::uint64_t seq, const char* what) {
  if (got.size() != want) {
    throw pingpong_error(std::string(what) + " " + std::to_string(seq) + ": " + std::to_string(got.size()) +
                         " bytes, expected " + std::to_string(want));
  }
}

}  // namespace

server_report run_server(const options& opts, const std::function<void(std::uint16_t)>& on_listening) {
  server_report report;
  // Declaration order is teardown order reversed: connection resources go before the ids.
  auto channel = make_channel();
  auto listener = make_id(channel.get());
  sockaddr_in addr = make_ipv4(opts);
  check_call(rdma_bind_addr(listener.get(), reinterpret_cast<sockaddr*>(&addr)), "rdma_bind_addr");
  check_call(rdma_listen(listener.get(), 1), "rdma_listen");
  report.port = ntohs(rdma_get_src_port(listener.get()));
  if (on_listening) on_listening(report.port);

  const cm_event request = expect_cm_event(channel.get(), RDMA_CM_EVENT_CONNECT_REQUEST, opts.timeout);
  cm_id_ptr conn(request.id);
  rc_endpoint ep(conn.get(), opts.size, opts.timeout);
  ep.post_recv();  // before accepting, so the first ping always finds a receive
  rdma_conn_param param = connection_parameters();
  check_call(rdma_accept(conn.get(), &param), "rdma_accept");
  expect_cm_event(channel.get(), RDMA_CM_EVENT_ESTABLISHED, opts.timeout);

  for (std::uint64_t seq = 0; seq < opts.iterations; ++seq) {
    const auto ping = ep.wait_recv();
    check_size(ping, opts.size, seq, "ping");
    if (!check_payload(ping, seq)) {
      throw pingpong_error("ping " + std::to_string(seq) + " has the wrong contents");
    }
    std::memcpy(ep.send_buffer().data(), ping.data(), ping.size());
    if (seq + 1 < opts.iterations) ep.post_recv();  // before the echo: the next ping follows it
    ep.post_send();
    ep.wait_send();  // the single send buffer is reused for the next echo
    ++report.messages_checked;
  }
  // The server ends the connection: its last echo has been acknowledged, so nothing is in flight.
  check_call(rdma_disconnect(conn.get()), "rdma_disconnect");
  expect_cm_event(channel.get(), RDMA_CM_EVENT_DISCONNECTED, opts.timeout);
  return report;
}

client_report run_client(const options& opts) {
  client_report report;
  auto channel = make_channel();
  auto id = make_id(channel.get());
  sockaddr_in dst = make_ipv4(opts);
  const int timeout_ms = static_cast<int>(opts.timeout.count());
  check_call(rdma_resolve_addr(id.get(), nullptr, reinterpret_cast<sockaddr*>(&dst), timeout_ms),
             "rdma_resolve_addr");
  expect_cm_event(channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED, opts.timeout);
  check_call(rdma_resolve_route(id.get(), timeout_ms), "rdma_resolve_route");
  expect_cm_event(channel.get(), RDMA_CM_EVENT_ROUTE_RESOLVED, opts.timeout);

  rc_endpoint ep(id.get(), opts.size, opts.timeout);
  ep.post_recv();
  rdma_conn_param param = connection_parameters();
  check_call(rdma_connect(id.get(), &param), "rdma_connect");
  expect_cm_event(channel.get(), RDMA_CM_EVENT_ESTABLISHED, opts.timeout);

  std::vector<double> samples_us;
  samples_us.reserve(opts.iterations);
  for (std::uint64_t seq = 0; seq < opts.iterations; ++seq) {
    fill_payload(ep.send_buffer(), seq);
    const auto start = clock::now();
    ep.post_send();
    const auto echo = ep.wait_recv();
    const auto rtt = clock::now() - start;
    check_size(echo, opts.size, seq, "echo");
    if (!check_payload(echo, seq)) {
      throw pingpong_error("echo " + std::to_string(seq) + " differs from what was sent");
    }
    ep.wait_send();
    if (seq + 1 < opts.iterations) ep.post_recv();
    samples_us.push_back(std::chrono::duration<double, std::micro>(rtt).count());
    ++report.echoes_checked;
  }
  expect_cm_event(channel.get(), RDMA_CM_EVENT_DISCONNECTED, opts.timeout);
  report.rtt = summarize(std::move(samples_us));
  return report;
}

}  // namespace cm_pingpong
