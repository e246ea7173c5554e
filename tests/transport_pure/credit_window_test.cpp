// Unit tests of the rdma credit window (transport/rdma/credit_window.hpp), "receive ... / expect ..."
// style, plus a deterministic two-peer simulation (no I/O) of the deadlock the reserved credit and
// credit-only updates exist to prevent.
#include "transport/rdma/credit_window.hpp"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <random>
#include <stdexcept>

#include "transport/rdma/receive_ring.hpp"
#include "transport/rdma/wire.hpp"

using rdmarpc::transport::rdma::credit_window;
using rdmarpc::transport::rdma::receive_ring;

TEST_CASE("credit_window: starts with one credit per peer slot", "[credit]") {
  credit_window w(16, 8);
  CHECK(w.credits() == 16);
  CHECK(w.owed() == 0);
  CHECK(w.reserved() == 1);
  CHECK(w.can_send_data());
  CHECK_FALSE(w.wants_credit_update());
}

TEST_CASE("credit_window: announce threshold is max(2, local depth / 2)", "[credit]") {
  CHECK(credit_window(8, 4).announce_threshold() == 2);
  CHECK(credit_window(8, 5).announce_threshold() == 2);
  CHECK(credit_window(8, 9).announce_threshold() == 4);
  CHECK(credit_window(8, 128).announce_threshold() == 64);
}

TEST_CASE("credit_window: invalid construction throws", "[credit]") {
  CHECK_THROWS_AS(credit_window(8, 8, 0), std::invalid_argument);  // no reserve: could deadlock
  CHECK_THROWS_AS(credit_window(4, 8, 4), std::invalid_argument);  // no credit left for data
  CHECK_THROWS_AS(credit_window(8, 3), std::invalid_argument);     // local ring below the minimum
  CHECK_NOTHROW(credit_window(2, 4, 1));
}

TEST_CASE("credit_window: send data / expect one credit consumed", "[credit]") {
  credit_window w(16, 8);
  CHECK(w.take_for_data() == 0);  // nothing owed, nothing to announce
  CHECK(w.credits() == 15);
  CHECK(w.take_for_data() == 0);
  CHECK(w.credits() == 14);
}

TEST_CASE("credit_window: reserved credit is never used for data", "[credit]") {
  const std::uint32_t reserved = GENERATE(1u, 2u, 3u);
  credit_window w(8, 8, reserved);
  std::uint32_t sent = 0;
  while (w.can_send_data()) {
    w.take_for_data();
    ++sent;
  }
  CHECK(sent == 8 - reserved);
  CHECK(w.credits() == reserved);
  // The reserve is still there for updates once enough is owed...
  w.on_local_reposted(w.announce_threshold());
  REQUIRE(w.wants_credit_update());
  w.take_for_credit_update();
  CHECK(w.credits() == reserved - 1);
  // ...and data still may not touch what is left of it.
  CHECK_FALSE(w.can_send_data());
}

TEST_CASE("credit_window: reposted slots piggyback on every outgoing data message", "[credit]") {
  credit_window w(16, 8);
  w.on_local_reposted(3);
  CHECK(w.owed() == 3);
  CHECK(w.take_for_data() == 3);  // all owed ride on this message
  CHECK(w.owed() == 0);
  CHECK(w.take_for_data() == 0);  // already announced: not twice
  w.on_local_reposted(1);
  w.on_local_reposted(1);
  CHECK(w.take_for_data() == 2);
}

TEST_CASE("credit_window: owed below threshold / expect no credit-only update", "[credit]") {
  credit_window w(16, 8);  // threshold 4
  w.on_local_reposted(3);
  CHECK_FALSE(w.wants_credit_update());
  w.on_local_reposted(1);
  CHECK(w.wants_credit_update());
}

TEST_CASE("credit_window: owed past threshold with nothing going out / expect credit update", "[credit]") {
  credit_window w(16, 8);
  w.on_local_reposted(6);
  REQUIRE(w.wants_credit_update());
  CHECK(w.take_for_credit_update() == 6);
  CHECK(w.credits() == 15);  // an update costs a credit too: it occupies a peer slot
  CHECK(w.owed() == 0);
  CHECK_FALSE(w.wants_credit_update());
}

TEST_CASE("credit_window: no credit at all / expect no update even when owed", "[credit]") {
  credit_window w(4, 4);  // threshold 2
  while (w.can_send_data()) w.take_for_data();
  w.on_local_reposted(2);
  REQUIRE(w.wants_credit_update());
  w.take_for_credit_update();  // uses the reserved credit
  REQUIRE(w.credits() == 0);
  w.on_local_reposted(4);
  CHECK_FALSE(w.wants_credit_update());
  CHECK_FALSE(w.can_send_data());
}

TEST_CASE("credit_window: receive peer announcement / expect credits back", "[credit]") {
  credit_window w(8, 8);
  for (int i = 0; i < 7; ++i) w.take_for_data();
  REQUIRE_FALSE(w.can_send_data());
  REQUIRE(w.on_peer_announced(5));
  CHECK(w.credits() == 6);
  CHECK(w.can_send_data());
  REQUIRE(w.on_peer_announced(2));
  CHECK(w.credits() == 8);
}

TEST_CASE("credit_window: receive announcement beyond the peer's ring / expect protocol violation",
          "[credit]") {
  credit_window w(8, 8);
  CHECK_FALSE(w.on_peer_announced(1));  // the peer has not used any slot: it cannot have reposted one
  CHECK(w.credits() == 8);
  w.take_for_data();
  w.take_for_data();
  CHECK_FALSE(w.on_peer_announced(3));
  CHECK(w.credits() == 6);
  CHECK(w.on_peer_announced(2));
  CHECK(w.on_peer_announced(0));
}

TEST_CASE("credit_window: announcement is capped to what one immediate can carry", "[credit]") {
  credit_window w(8, 0xffff);
  w.on_local_reposted(0xffff + 10);  // more than a 16-bit immediate can say
  CHECK(w.take_for_data() == rdmarpc::transport::rdma::wire::kMaxCreditsPerImm);
  CHECK(w.owed() == 10);
  CHECK(w.take_for_data() == 10);
}

// --- two busy peers ------------------------------------------------------------------------------
// A deterministic simulation of two connections that both blast data at each other. Each side has a
// receive ring of real slots (posted / held by the application / released), a FIFO of messages in
// flight towards it (RC is ordered), and a credit window. A receiver only releases and reposts
// slots after it received into them, in random-sized batches. The ring is checked independently
// of the windows: a delivery with no posted slot is an RNR (what rnr_retry = 0 turns into a fatal
// completion error). A step in which nobody can do anything while data is still waiting is a deadlock.
namespace {

// Same interface as credit_window, but without a reserve: data may take the last credit. Used to
// show that the simulation does detect the deadlock the reserve prevents.
class unreserved_window {
 public:
  unreserved_window(std::uint32_t peer_depth, std::uint32_t local_depth)
      : peer_depth_(peer_depth),
        threshold_(std::max<std::uint32_t>(2, local_depth / 2)),
        credits_(peer_depth) {}
  bool can_send_data() const { return credits_ > 0; }
  std::uint32_t take_for_data() { return take(); }
  bool wants_credit_update() const { return owed_ >= threshold_ && credits_ >= 1; }
  std::uint32_t take_for_credit_update() { return take(); }
  bool on_peer_announced(std::uint32_t n) {
    if (n > peer_depth_ - credits_) return false;
    credits_ += n;
    return true;
  }
  void on_local_reposted(std::uint32_t n) { owed_ += n; }
  std::uint32_t credits() const { return credits_; }

 private:
  std::uint32_t take() {
    --credits_;
    return std::exchange(owed_, 0);
  }
  std::uint32_t peer_depth_, threshold_, credits_, owed_ = 0;
};

enum class policy {
  correct,                 // credit_window used as specified (updates whenever no data can go out)
  updates_on_empty_queue,  // the original header wording: updates only when the send queue is empty
  no_credit_updates,       // credits only ever piggyback on data
  no_flow_control,         // send whenever there is data (send_without_credits_for_testing)
};

// When released receive slots go back on the queue.
enum class repost_rule {
  random_batches,  // in random batches, soon (any rule that eventually reposts everything)
  ring,            // receive_ring::repost_due(): a batch of depth/8, or the queue down to half the ring
  quarter_ring,    // a wrong variant: a batch, or the queue down to a quarter of the ring
};

struct sim_message {
  std::uint32_t credits;
  bool credit_only;
};

template <typename Window>
struct sim_peer {
  sim_peer(std::uint32_t peer_depth, std::uint32_t local_depth, std::uint64_t to_send)
      : window(peer_depth, local_depth),
        depth(local_depth),
        posted(local_depth),
        ring(local_depth),
        data_to_send(to_send) {}
  Window window;
  std::uint32_t depth;         // of our receive ring
  std::uint32_t posted;        // receive slots posted (credits we gave the peer, physically)
  std::uint32_t held = 0;      // slots holding data the application has not released yet
  std::uint32_t released = 0;  // released slots waiting to be reposted in a batch
  receive_ring ring;           // the same slots in the transport's own bookkeeping (repost_rule::ring)
  std::uint64_t data_to_send;
  std::uint64_t data_received = 0;
  std::uint64_t updates_sent = 0;
  std::deque<sim_message> inbound;  // in flight towards this peer
};

struct sim_result {
  bool deadlocked = false;
  std::uint64_t rnr = 0;                  // deliveries that found no posted slot
  std::uint64_t protocol_violations = 0;  // on_peer_announced refused
  std::uint64_t sent_without_credit = 0;  // sends made while the window said no
  std::uint64_t received[2] = {0, 0};
  std::uint64_t updates[2] = {0, 0};
  std::uint64_t longest_starvation[2] = {0, 0};  // most steps in a row a peer with data waiting sent no data
  std::uint64_t steps = 0;
};

// `hold`: the application keeps that many received messages unreleased for good (it releases only
// beyond them), as one that holds messages for a long time.
template <typename Window>
sim_result simulate(policy p, std::uint32_t depth_a, std::uint32_t depth_b, std::uint64_t messages,
                    std::uint32_t seed, std::uint64_t max_steps,
                    repost_rule rule = repost_rule::random_batches, std::uint32_t hold = 0) {
  std::array<sim_peer<Window>, 2> peers{sim_peer<Window>(depth_b, depth_a, messages),
                                        sim_peer<Window>(depth_a, depth_b, messages)};
  std::mt19937 rng(seed);  // mt19937's sequence is fully specified: the run is reproducible
  auto roll = [&rng](std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); };
  // Whether a peer's released slots are due under a deferring rule (never called for random_batches).
  const auto due = [rule](const sim_peer<Window>& q) {
    if (rule == repost_rule::ring) return q.ring.repost_due();
    return q.released >= q.ring.repost_batch() || q.posted <= q.depth / 4;  // ring's batch, a lower floor
  };
  sim_result result;
  std::array<std::uint64_t, 2> starving{0, 0};

  for (; result.steps < max_steps; ++result.steps) {
    bool acted = false;
    for (int turn = 0; turn < 2; ++turn) {
      const int self = (result.steps % 2 == 0) ? turn : 1 - turn;  // alternate who goes first
      auto& me = peers[self];
      auto& other = peers[1 - self];

      // 1. Send a burst: data while credits allow, else a credit-only update if one is wanted.
      bool sent_data = false;
      for (std::uint32_t burst = roll(4) + 1; burst > 0; --burst) {
        const bool data_waiting = me.data_to_send > 0;
        if (p == policy::no_flow_control) {
          if (!data_waiting) break;
          // Account in the window while it allows, so we can count the sends it would have refused.
          if (me.window.can_send_data()) {
            me.window.take_for_data();
          } else {
            ++result.sent_without_credit;
          }
          other.inbound.push_back({0, false});
          --me.data_to_send;
          sent_data = acted = true;
          continue;
        }
        if (data_waiting && me.window.can_send_data()) {
          other.inbound.push_back({me.window.take_for_data(), false});
          --me.data_to_send;
          sent_data = acted = true;
          continue;
        }
        const bool may_update =
            p == policy::correct || (p == policy::updates_on_empty_queue && !data_waiting);
        if (may_update && me.window.wants_credit_update()) {
          other.inbound.push_back({me.window.take_for_credit_update(), true});
          ++me.updates_sent;
          acted = true;
          continue;
        }
        break;
      }
      starving[self] = (me.data_to_send > 0 && !sent_data) ? starving[self] + 1 : 0;
      result.longest_starvation[self] = std::max(result.longest_starvation[self], starving[self]);

      // 2. Deliver some of what is in flight towards us, in order, each into a posted slot.
      for (std::uint32_t n = roll(5); n > 0 && !me.inbound.empty(); --n) {
        const sim_message m = me.inbound.front();
        me.inbound.pop_front();
        acted = true;
        if (me.posted == 0) {
          ++result.rnr;  // the message found no receive posted
          continue;
        }
        --me.posted;
        me.ring.on_completion();
        if (p != policy::no_flow_control && !me.window.on_peer_announced(m.credits))
          ++result.protocol_violations;
        if (m.credit_only) {
          ++me.released;  // nothing for the application: the slot is free again at once
          me.ring.release(0);
        } else {
          ++me.held;
          ++me.data_received;
        }
      }

      // 3. The application releases some held messages (beyond the ones it keeps); released slots
      //    are reposted by the rule.
      for (std::uint32_t n = roll(4); n > 0 && me.held > hold; --n) {
        --me.held;
        ++me.released;
        me.ring.release(0);
        acted = true;
      }
      const bool repost =
          me.released > 0 &&
          (rule == repost_rule::random_batches ? (me.released >= 4 || roll(3) == 0) : due(me));
      if (repost) {
        me.posted += me.released;
        if (p != policy::no_flow_control) me.window.on_local_reposted(me.released);
        me.released = 0;
        me.ring.mark_posted();
        acted = true;
      }
    }

    const bool work_left = peers[0].data_to_send > 0 || peers[1].data_to_send > 0 ||
                           !peers[0].inbound.empty() || !peers[1].inbound.empty();
    if (!work_left) break;
    // Nobody sent, delivered, released or reposted, and nothing is pending that could change that
    // on a later roll of the dice: stuck for good. (Kept messages and released slots that a
    // deferring rule does not repost yet change nothing by themselves.)
    const auto may_act = [&](const sim_peer<Window>& q) {
      return q.held > hold || !q.inbound.empty() ||
             (q.released > 0 && (rule == repost_rule::random_batches || due(q)));
    };
    const bool pending = may_act(peers[0]) || may_act(peers[1]);
    if (!acted && !pending) {
      result.deadlocked = true;
      break;
    }
  }
  for (int i = 0; i < 2; ++i) {
    result.received[i] = peers[i].data_received;
    result.updates[i] = peers[i].updates_sent;
  }
  return result;
}

}  // namespace

TEST_CASE("two busy peers: both always progress, never send without a credit, never RNR", "[credit][sim]") {
  const std::uint32_t seed = GENERATE(1u, 2u, 3u, 42u, 1234u);
  const auto [depth_a, depth_b] =
      GENERATE(std::pair{4u, 4u}, std::pair{4u, 16u}, std::pair{16u, 5u}, std::pair{128u, 128u});
  CAPTURE(seed, depth_a, depth_b);
  constexpr std::uint64_t kMessages = 20000;
  const auto r = simulate<credit_window>(policy::correct, depth_a, depth_b, kMessages, seed, 2'000'000);
  CHECK_FALSE(r.deadlocked);
  CHECK(r.rnr == 0);
  CHECK(r.protocol_violations == 0);
  CHECK(r.sent_without_credit == 0);
  // Every message sent by either side arrived.
  CHECK(r.received[0] == kMessages);
  CHECK(r.received[1] == kMessages);
  // Progress all along, not just eventually: no long stretch where a side with data could not send.
  CHECK(r.longest_starvation[0] < 200);
  CHECK(r.longest_starvation[1] < 200);
  // The saturated run needed credit-only updates (the reserve was actually exercised).
  CHECK(r.updates[0] + r.updates[1] > 0);
}

TEST_CASE("two busy peers: receive_ring's deferred reposts never stall a peer, even with messages held",
          "[credit][sim]") {
  const std::uint32_t seed = GENERATE(1u, 2u, 3u);
  const auto [depth_a, depth_b] = GENERATE(std::pair{4u, 4u}, std::pair{16u, 16u}, std::pair{17u, 5u},
                                           std::pair{128u, 128u}, std::pair{256u, 16u});
  // Held for good: none, or up to just under half the smaller ring (holding half or more can stall
  // a peer whatever the repost rule: the credits it waits for are in the held slots).
  const std::uint32_t smaller = std::min(depth_a, depth_b);
  const std::uint32_t hold = GENERATE_COPY(0u, smaller / 2 - 1);
  CAPTURE(seed, depth_a, depth_b, hold);
  constexpr std::uint64_t kMessages = 20000;
  const auto r = simulate<credit_window>(policy::correct, depth_a, depth_b, kMessages, seed, 2'000'000,
                                         repost_rule::ring, hold);
  CHECK_FALSE(r.deadlocked);
  CHECK(r.rnr == 0);
  CHECK(r.protocol_violations == 0);
  CHECK(r.received[0] == kMessages);
  CHECK(r.received[1] == kMessages);
}

TEST_CASE("two busy peers: deferring reposts until a quarter of the ring is left deadlocks",
          "[credit][sim]") {
  const std::uint32_t seed = GENERATE(1u, 2u, 3u);
  CAPTURE(seed);
  const auto r =
      simulate<credit_window>(policy::correct, 16, 16, 20000, seed, 2'000'000, repost_rule::quarter_ring, 7);
  CHECK(r.deadlocked);
  CHECK(r.rnr == 0);
}

// The rule behind receive_ring::repost_due and credit_window's update threshold together: while
// reposts are deferred (more than half the ring posted) and no update is due (owed below the
// threshold), the peer still has more than its reserved credit once nothing is in flight.
TEST_CASE("deferred reposts leave the peer more than the reserved credit", "[credit]") {
  for (const std::uint32_t depth : {4u, 5u, 8u, 16u, 17u, 128u, 256u, 1024u}) {
    CAPTURE(depth);
    const credit_window window(depth, depth);
    const std::uint32_t fewest_posted_while_deferred = depth / 2 + 1;
    const std::uint32_t most_owed_without_update = window.announce_threshold() - 1;
    CHECK(fewest_posted_while_deferred - most_owed_without_update > window.reserved());
  }
}

TEST_CASE("two busy peers: without the reserved credit they deadlock", "[credit][sim]") {
  const std::uint32_t seed = GENERATE(1u, 2u, 3u);
  CAPTURE(seed);
  const auto r = simulate<unreserved_window>(policy::correct, 8, 8, 20000, seed, 2'000'000);
  CHECK(r.deadlocked);
  CHECK(r.rnr == 0);  // never unsafe, just stuck
  CHECK(r.received[0] + r.received[1] < 40000);
}

TEST_CASE("two busy peers: without credit-only updates they deadlock", "[credit][sim]") {
  const std::uint32_t seed = GENERATE(1u, 2u, 3u);
  CAPTURE(seed);
  const auto r = simulate<credit_window>(policy::no_credit_updates, 8, 8, 20000, seed, 2'000'000);
  CHECK(r.deadlocked);
  CHECK(r.rnr == 0);
}

TEST_CASE("two busy peers: updates only on an empty send queue deadlock (the header's fixed wording)",
          "[credit][sim]") {
  const std::uint32_t seed = GENERATE(1u, 2u, 3u);
  CAPTURE(seed);
  const auto r = simulate<credit_window>(policy::updates_on_empty_queue, 8, 8, 20000, seed, 2'000'000);
  CHECK(r.deadlocked);
}

TEST_CASE("two busy peers: without flow control the ring is overrun (RNR)", "[credit][sim]") {
  const auto r = simulate<credit_window>(policy::no_flow_control, 8, 8, 20000, 1, 2'000'000);
  CHECK(r.rnr > 0);
  CHECK(r.sent_without_credit > 0);
}
