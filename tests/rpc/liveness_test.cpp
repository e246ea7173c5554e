// The heartbeat state machine and the server's ping policer, driven by hand with made-up times:
// every transition of rpc/liveness.hpp, no I/O and no clock.
#include "rpc/liveness.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <initializer_list>
#include <utility>
#include <vector>

using rdmarpc::connection_liveness;
using rdmarpc::liveness;
using rdmarpc::peer_liveness;
using rdmarpc::ping_policer;
using namespace std::chrono_literals;
using action = liveness::action;

namespace {

const liveness::clock::time_point t0{std::chrono::seconds(1000)};

// The members share one peer_liveness, as connections to one peer domain do once a heartbeat
// frame named it (each share() counts as hearing from the peer).
void share_all(std::initializer_list<connection_liveness*> members) {
  const auto shared = (*members.begin())->make_shareable(t0);
  for (auto* m : members) m->share(shared);
}

}  // namespace

TEST_CASE("liveness: disabled by a zero or max interval or timeout", "[liveness]") {
  for (auto [interval, timeout] :
       {std::pair{liveness::clock::duration::zero(), liveness::clock::duration(1s)},
        std::pair{liveness::clock::duration(1s), liveness::clock::duration::zero()},
        std::pair{liveness::clock::duration::max(), liveness::clock::duration(1s)},
        std::pair{liveness::clock::duration(1s), liveness::clock::duration::max()}}) {
    liveness l(interval, timeout, t0);
    CHECK_FALSE(l.enabled());
    CHECK(l.tick(t0 + 1h) == action::none);
  }
}

TEST_CASE("liveness: the tick period is the shorter of interval and timeout", "[liveness]") {
  liveness l(500ms, 300ms, t0);
  CHECK(l.enabled());
  CHECK(l.tick_period() == 300ms);
  CHECK(liveness(300ms, 300ms, t0).tick_period() == 300ms);
  CHECK(liveness(20ms, 2s, t0).tick_period() == 20ms);
  CHECK(liveness(std::chrono::microseconds(300), 2ms, t0).tick_period() == 1ms);  // never below 1 ms
}

TEST_CASE("liveness: silence for the interval sends one ping, an answer clears it", "[liveness]") {
  liveness l(500ms, 300ms, t0);
  CHECK(l.tick(t0 + 100ms) == action::none);
  CHECK(l.tick(t0 + 499ms) == action::none);
  REQUIRE(l.tick(t0 + 500ms) == action::send_ping);
  const auto v = l.ping_value();
  CHECK(l.ping_outstanding());
  // While it is outstanding, ticks before the timeout do nothing (no second ping).
  CHECK(l.tick(t0 + 600ms) == action::none);
  l.on_pong(v);
  CHECK_FALSE(l.ping_outstanding());
  CHECK(l.tick(t0 + 700ms) == action::none);  // the pong counted as traffic
  // The next ping only after another full interval of silence, with a new value.
  CHECK(l.tick(t0 + 1199ms) == action::none);
  REQUIRE(l.tick(t0 + 1200ms) == action::send_ping);
  CHECK(l.ping_value() != v);
}

TEST_CASE("liveness: no answer within the timeout means the peer is dead", "[liveness]") {
  liveness l(500ms, 300ms, t0);
  REQUIRE(l.tick(t0 + 500ms) == action::send_ping);
  CHECK(l.tick(t0 + 799ms) == action::none);
  CHECK(l.tick(t0 + 800ms) == action::peer_dead);
}

TEST_CASE("liveness: worst case detection is interval + timeout + one tick period", "[liveness]") {
  liveness l(300ms, 300ms, t0);  // the defaults
  const auto p = l.tick_period();
  // The last message arrived just after the tick at t0: it is only seen at the next tick.
  l.on_received();
  auto now = t0;
  action a = action::none;
  while (a != action::peer_dead) {
    now += p;
    a = l.tick(now);
  }
  CHECK(now - t0 == 300ms + 300ms + p);
  CHECK(now - t0 == 900ms);
}

TEST_CASE("liveness: a ping sent after a stall gets its whole timeout", "[liveness]") {
  liveness l(300ms, 300ms, t0);  // the defaults: a 300 ms grid
  // The process stalled 5.2 s: the tick of the instant t0 + 300ms runs at t0 + 5.5 s and pings.
  REQUIRE(l.tick(t0 + 300ms, t0 + 5500ms) == action::send_ping);
  // Timed from the first grid instant at or after it went out, not from the long-past instant:
  // the ticker's next instant (t0 + 5.7 s) finds it 0.2 s old, not 5.4 s.
  CHECK(l.ping_sent_at() == t0 + 5700ms);
  CHECK(l.tick(t0 + 5700ms) == action::none);
  CHECK(l.tick(t0 + 6000ms) == action::peer_dead);  // 0.5 s of real time went by unanswered
  // A ping sent on time is timed from its instant (2 ms of timer latency is not a stall).
  liveness m(300ms, 300ms, t0);
  REQUIRE(m.tick(t0 + 300ms, t0 + 300ms + 2ms) == action::send_ping);
  CHECK(m.ping_sent_at() == t0 + 300ms);
  CHECK(m.tick(t0 + 600ms, t0 + 600ms + 2ms) == action::peer_dead);
}

TEST_CASE(
    "liveness: a late tick holds back its verdict on an overdue ping once, for what the stall left unread",
    "[liveness]") {
  liveness l(300ms, 300ms, t0);
  REQUIRE(l.tick(t0 + 300ms) == action::send_ping);
  // The process stalls; the pong arrives meanwhile, unread. The tick of t0 + 600ms runs at 5 s.
  CHECK(l.tick(t0 + 600ms, t0 + 5s) == action::none);  // held: the pong may be waiting
  l.on_pong(l.ping_value());                           // read after the late tick
  CHECK(l.tick(t0 + 5100ms) == action::none);
  CHECK_FALSE(l.ping_outstanding());
  // No pong at all: the next tick decides, late or not.
  liveness m(300ms, 300ms, t0);
  REQUIRE(m.tick(t0 + 300ms) == action::send_ping);
  CHECK(m.tick(t0 + 600ms, t0 + 5s) == action::none);
  CHECK(m.tick(t0 + 5100ms, t0 + 5500ms) == action::peer_dead);  // held once only: late again, still dead
  // A later ping gets its own hold.
  liveness n(300ms, 300ms, t0);
  REQUIRE(n.tick(t0 + 300ms) == action::send_ping);
  CHECK(n.tick(t0 + 600ms, t0 + 5s) == action::none);
  n.on_pong(n.ping_value());
  CHECK(n.tick(t0 + 5100ms) == action::none);
  REQUIRE(n.tick(t0 + 5400ms) == action::send_ping);
  CHECK(n.tick(t0 + 5700ms, t0 + 9s) == action::none);
}

TEST_CASE("liveness: a ping is timed from its instant within a quarter period of timer latency",
          "[liveness]") {
  liveness l(100ms, 200ms, t0);  // period 100 ms
  CHECK(l.ping_stamp(t0, t0) == t0);
  CHECK(l.ping_stamp(t0, t0 + 25ms) == t0);
  CHECK(l.ping_stamp(t0, t0 + 26ms) == t0 + 100ms);
  CHECK(l.ping_stamp(t0, t0 + 100ms) == t0 + 100ms);
  CHECK(l.ping_stamp(t0, t0 + 101ms) == t0 + 200ms);
}

TEST_CASE("liveness: any received traffic is a sign of life and costs no ping", "[liveness]") {
  liveness l(500ms, 300ms, t0);
  for (int i = 1; i <= 20; ++i) {
    l.on_received();
    CHECK(l.tick(t0 + i * 100ms) == action::none);
  }
  CHECK_FALSE(l.ping_outstanding());
}

TEST_CASE("liveness: traffic while a ping is outstanding answers it (a peer's ping too)", "[liveness]") {
  liveness l(500ms, 300ms, t0);
  REQUIRE(l.tick(t0 + 500ms) == action::send_ping);
  l.on_received();  // e.g. the peer's own ping crossed ours
  CHECK(l.tick(t0 + 700ms) == action::none);
  CHECK_FALSE(l.ping_outstanding());
  CHECK(l.tick(t0 + 1100ms) == action::none);  // the timeout no longer runs
}

TEST_CASE("liveness: a stale pong does not answer the outstanding ping before the next tick", "[liveness]") {
  liveness l(500ms, 300ms, t0);
  REQUIRE(l.tick(t0 + 500ms) == action::send_ping);
  l.on_pong(l.ping_value() + 7);
  CHECK(l.ping_outstanding());  // not our ping's value
  // It still arrived, so the next tick counts it as traffic.
  CHECK(l.tick(t0 + 600ms) == action::none);
  CHECK_FALSE(l.ping_outstanding());
}

TEST_CASE("liveness: calls waiting for replies are no sign of life", "[liveness]") {
  // Only on_received/on_pong feed the machine: sending (requests in flight) changes nothing.
  liveness l(500ms, 300ms, t0);
  REQUIRE(l.tick(t0 + 500ms) == action::send_ping);
  CHECK(l.tick(t0 + 800ms) == action::peer_dead);
}

TEST_CASE("ping_policer: pings at the permitted rate are fine", "[liveness]") {
  ping_policer p(200ms);
  for (int i = 0; i < 10; ++i) CHECK_FALSE(p.on_ping(t0 + i * 200ms));
  CHECK(p.strikes() == 0);
}

TEST_CASE("ping_policer: too many pings in a row cut the client off after the strikes", "[liveness]") {
  ping_policer p(200ms, 2);
  CHECK_FALSE(p.on_ping(t0));
  CHECK_FALSE(p.on_ping(t0 + 10ms));  // strike 1
  CHECK_FALSE(p.on_ping(t0 + 20ms));  // strike 2
  CHECK(p.on_ping(t0 + 30ms));        // strike 3: beyond max_strikes
}

TEST_CASE("ping_policer: a ping at a permitted distance clears the strikes", "[liveness]") {
  ping_policer p(200ms, 2);
  CHECK_FALSE(p.on_ping(t0));
  CHECK_FALSE(p.on_ping(t0 + 10ms));
  CHECK_FALSE(p.on_ping(t0 + 20ms));
  CHECK(p.strikes() == 2);
  CHECK_FALSE(p.on_ping(t0 + 300ms));
  CHECK(p.strikes() == 0);
  CHECK_FALSE(p.on_ping(t0 + 310ms));
}

TEST_CASE("ping_policer: a zero minimum allows any rate", "[liveness]") {
  ping_policer p(0ms);
  for (int i = 0; i < 10; ++i) CHECK_FALSE(p.on_ping(t0));
}

TEST_CASE("liveness: ticks fall on a grid shared by every connection with the same settings", "[liveness]") {
  liveness a(500ms, 300ms, t0);
  liveness b(500ms, 300ms, t0 + 37ms);
  const auto now = t0 + 1234ms;
  CHECK(a.next_tick(now) == b.next_tick(now));
  CHECK(a.next_tick(now) > now);
  CHECK(a.next_tick(now) - now <= a.tick_period());
  CHECK(a.next_tick(now).time_since_epoch() % a.tick_period() == liveness::clock::duration::zero());
  // Exactly on a tick: the next one, never the same instant again.
  const auto on = a.next_tick(now);
  CHECK(a.next_tick(on) == on + a.tick_period());
  // A server's grid is half a period later: it never ticks with its clients.
  const auto half = a.tick_period() / 2;
  const auto server_tick = a.next_tick(now, half);
  CHECK(server_tick > now);
  CHECK(server_tick - now <= a.tick_period());
  CHECK((server_tick.time_since_epoch() - half) % a.tick_period() == liveness::clock::duration::zero());
  CHECK(a.next_tick(server_tick, half) == server_tick + a.tick_period());
}

TEST_CASE("liveness: a side whose peer pings does not ping too, until the peer's ping is overdue",
          "[liveness]") {
  liveness l(300ms, 300ms, t0);  // the defaults: tick period 300 ms
  // The peer pings every 600 ms (a default channel): this side never pings.
  l.on_peer_ping();
  for (auto t = t0 + 300ms; t < t0 + 10s; t += 300ms) {
    if ((t - t0) % 600ms == 0ms) l.on_peer_ping();
    CHECK(l.tick(t) == action::none);
  }
  // The peer falls silent after its ping at 10 s: this side waits interval + timeout + one period
  // of silence (its next ping is overdue by then), then pings itself.
  l.on_peer_ping();
  CHECK(l.tick(t0 + 10s) == action::none);  // seen: last heard at 10 s
  CHECK(l.tick(t0 + 10s + 600ms) == action::none);
  CHECK(l.tick(t0 + 10s + 899ms) == action::none);
  REQUIRE(l.tick(t0 + 10s + 900ms) == action::send_ping);
  // No answer within the timeout: dead, as without the peer's pings.
  CHECK(l.tick(t0 + 10s + 1199ms) == action::none);
  CHECK(l.tick(t0 + 10s + 1200ms) == action::peer_dead);
}

TEST_CASE("liveness: after the peer stopped pinging, this side pings at its own interval again",
          "[liveness]") {
  liveness l(300ms, 300ms, t0);
  l.on_peer_ping();
  CHECK(l.tick(t0) == action::none);
  REQUIRE(l.tick(t0 + 900ms) == action::send_ping);
  l.on_pong(l.ping_value());
  CHECK(l.tick(t0 + 1200ms) == action::none);  // the pong: last heard at 1.2 s
  // Ordinary traffic does not make this side defer again; only a ping from the peer does.
  l.on_received();
  CHECK(l.tick(t0 + 1500ms) == action::none);
  REQUIRE(l.tick(t0 + 1800ms) == action::send_ping);
}

TEST_CASE(
    "peer_liveness: members ticking at one instant send one ping through two, and all see the peer dead",
    "[liveness]") {
  peer_liveness shared(100ms, 100ms, t0);
  const int a = 0, b = 0, c = 0;
  constexpr auto none = liveness::action::none;
  constexpr auto ping = liveness::action::send_ping;
  constexpr auto dead = liveness::action::peer_dead;
  // Three members tick at each instant; the shared state ticks once per instant.
  CHECK(shared.member_tick(t0 + 100ms, &a) == ping);  // silence for the interval: two carry the ping
  CHECK(shared.member_tick(t0 + 100ms, &b) == ping);
  CHECK(shared.member_tick(t0 + 100ms, &c) == none);
  CHECK(shared.state().ping_outstanding());
  CHECK(shared.member_tick(t0 + 200ms, &a) == dead);  // no answer within the timeout: every member ends
  CHECK(shared.member_tick(t0 + 200ms, &b) == dead);
  CHECK(shared.member_tick(t0 + 200ms, &c) == dead);
}

TEST_CASE("peer_liveness: a member without send room passes the ping to the next one", "[liveness]") {
  peer_liveness shared(100ms, 100ms, t0);
  const int a = 0, b = 0, c = 0, d = 0;
  CHECK(shared.member_tick(t0 + 100ms, &a) == liveness::action::send_ping);
  shared.member_ping_not_sent(&a);
  CHECK(shared.member_tick(t0 + 100ms, &b) == liveness::action::send_ping);
  CHECK(shared.member_tick(t0 + 100ms, &c) == liveness::action::send_ping);
  CHECK(shared.member_tick(t0 + 100ms, &d) == liveness::action::none);
}

TEST_CASE("peer_liveness: a frame on any member answers for all of them", "[liveness]") {
  peer_liveness shared(100ms, 100ms, t0);
  const int a = 0, b = 0, c = 0;
  CHECK(shared.member_tick(t0 + 100ms, &a) == liveness::action::send_ping);
  CHECK(shared.member_tick(t0 + 100ms, &b) == liveness::action::send_ping);
  CHECK(shared.member_tick(t0 + 100ms, &c) == liveness::action::none);
  shared.state().on_pong(shared.state().ping_value());  // arrived on one carrier
  CHECK(shared.member_tick(t0 + 200ms, &a) == liveness::action::none);
  CHECK(shared.member_tick(t0 + 200ms, &c) == liveness::action::none);
  CHECK_FALSE(shared.state().ping_outstanding());
  shared.state().on_received();  // any frame on any member, later on
  CHECK(shared.member_tick(t0 + 300ms, &a) == liveness::action::none);
  CHECK(shared.member_tick(t0 + 400ms, &a) == liveness::action::send_ping);  // an interval since
}

TEST_CASE("peer_liveness: only the same settings are shared", "[liveness]") {
  const peer_liveness a(100ms, 300ms, t0), b(100ms, 300ms, t0), c(300ms, 100ms, t0);
  CHECK(a.same_settings(b));
  CHECK_FALSE(a.same_settings(c));  // the same tick period, other settings
}

TEST_CASE("peer_liveness: when every carrier of the ping left, the others are not timed out", "[liveness]") {
  peer_liveness shared(100ms, 100ms, t0);
  const int a = 0, b = 0, c = 0;
  CHECK(shared.member_tick(t0 + 100ms, &a) == liveness::action::send_ping);
  CHECK(shared.member_tick(t0 + 100ms, &b) == liveness::action::send_ping);
  CHECK(shared.member_tick(t0 + 100ms, &c) == liveness::action::none);
  shared.member_left(&c);  // not a carrier: nothing changes
  shared.member_left(&a);  // b still carries it
  CHECK(shared.state().ping_outstanding());
  shared.member_left(&b);  // its pong will never be read
  CHECK_FALSE(shared.state().ping_outstanding());
  CHECK(shared.member_tick(t0 + 200ms, &c) == liveness::action::send_ping);  // not peer_dead
  CHECK(shared.member_tick(t0 + 300ms, &c) == liveness::action::peer_dead);  // this one unanswered
}

TEST_CASE("connection_liveness: alone it behaves as liveness", "[liveness]") {
  connection_liveness live(100ms, 100ms, t0);
  CHECK_FALSE(live.shared());
  CHECK(live.tick(t0 + 100ms, false) == action::send_ping);
  live.on_pong(live.ping_value());
  CHECK(live.tick(t0 + 200ms, false) == action::none);
  CHECK(live.tick(t0 + 300ms, false) == action::send_ping);
  CHECK(live.tick(t0 + 400ms, false) == action::peer_dead);
}

TEST_CASE("connection_liveness: idle members share the ping, and one in use checks itself", "[liveness]") {
  connection_liveness a(100ms, 100ms, t0), b(100ms, 100ms, t0), c(100ms, 100ms, t0);
  share_all({&a, &b, &c});  // each joins on a heartbeat frame: the shared state heard from the peer
  CHECK(a.shared());
  CHECK(a.tick(t0 + 100ms, false) == action::none);
  CHECK(b.tick(t0 + 100ms, false) == action::none);
  CHECK(c.tick(t0 + 100ms, false) == action::none);
  // Idle: one ping, through the first two to tick.
  CHECK(a.tick(t0 + 200ms, false) == action::send_ping);
  CHECK(b.tick(t0 + 200ms, false) == action::send_ping);
  CHECK(c.tick(t0 + 200ms, false) == action::none);
  a.on_pong(a.ping_value());
  a.on_received();
  b.on_received();
  CHECK(a.tick(t0 + 300ms, false) == action::none);
  CHECK(b.tick(t0 + 300ms, false) == action::none);
  CHECK(c.tick(t0 + 300ms, false) == action::none);
  // c carries a call from 400 ms on; a keeps hearing from the peer. c's own silence counts from
  // its first tick in use, so it pings on its own path an interval later and is dead a timeout
  // after that: what a hears is no answer on c's path.
  CHECK(a.tick(t0 + 400ms, false) == action::send_ping);
  CHECK(b.tick(t0 + 400ms, false) == action::send_ping);
  CHECK(c.tick(t0 + 400ms, true) == action::none);
  a.on_received();
  b.on_received();
  CHECK(a.tick(t0 + 500ms, false) == action::none);
  CHECK(b.tick(t0 + 500ms, false) == action::none);
  CHECK(c.tick(t0 + 500ms, true) == action::send_ping);
  a.on_received();
  CHECK(a.tick(t0 + 600ms, false) == action::none);
  CHECK(c.tick(t0 + 600ms, true) == action::peer_dead);
}

TEST_CASE("connection_liveness: a carrier whose own path stays silent ends alone", "[liveness]") {
  connection_liveness a(100ms, 100ms, t0), b(100ms, 100ms, t0), c(100ms, 100ms, t0);
  share_all({&a, &b, &c});
  for (auto* m : {&a, &b, &c}) CHECK(m->tick(t0 + 100ms, false) == action::none);
  CHECK(a.tick(t0 + 200ms, false) == action::send_ping);
  CHECK(b.tick(t0 + 200ms, false) == action::send_ping);
  CHECK(c.tick(t0 + 200ms, false) == action::none);
  b.on_pong(b.ping_value());  // b's path answers, a's does not
  b.on_received();
  CHECK(a.tick(t0 + 300ms, false) == action::peer_dead);
  CHECK(b.tick(t0 + 300ms, false) == action::none);
  CHECK(c.tick(t0 + 300ms, false) == action::none);
}

TEST_CASE("connection_liveness: a shared ping sent after a stall times its carriers from when it went out",
          "[liveness]") {
  connection_liveness a(100ms, 100ms, t0), b(100ms, 100ms, t0);
  share_all({&a, &b});
  for (auto* m : {&a, &b}) CHECK(m->tick(t0 + 100ms, false) == action::none);
  // The tick of t0 + 200ms runs 1.05 s late and sends the shared ping through both.
  CHECK(a.tick(t0 + 200ms, t0 + 1250ms, false) == action::send_ping);
  CHECK(b.tick(t0 + 200ms, t0 + 1250ms, false) == action::send_ping);
  // Timed from t0 + 1.3 s (the ticker's next instant), neither the shared state nor a carrier's own
  // path is overdue there.
  CHECK(a.tick(t0 + 1300ms, false) == action::none);
  CHECK(b.tick(t0 + 1300ms, false) == action::none);
  b.on_pong(b.ping_value());  // b's path answers, a's does not
  b.on_received();
  // A late tick holds back a's own verdict once (what the stall left unread); the next decides.
  CHECK(a.tick(t0 + 1400ms, t0 + 2s, false) == action::none);
  CHECK(b.tick(t0 + 1400ms, t0 + 2s, false) == action::none);
  CHECK(a.tick(t0 + 2100ms, false) == action::peer_dead);
  CHECK(b.tick(t0 + 2100ms, false) == action::send_ping);  // 700 ms of silence: b pings for the group
}

TEST_CASE(
    "connection_liveness: a late tick holds back the shared verdict and an in-use connection's own, once",
    "[liveness]") {
  // Shared and idle: the overdue shared ping's verdict waits for the next tick.
  connection_liveness a(100ms, 100ms, t0), b(100ms, 100ms, t0);
  share_all({&a, &b});
  for (auto* m : {&a, &b}) CHECK(m->tick(t0 + 100ms, false) == action::none);
  CHECK(a.tick(t0 + 200ms, false) == action::send_ping);
  CHECK(b.tick(t0 + 200ms, false) == action::send_ping);
  // The tick of t0 + 300ms runs 1 s late: neither the shared state nor a carrier's own path ends it.
  CHECK(a.tick(t0 + 300ms, t0 + 1300ms, false) == action::none);
  CHECK(b.tick(t0 + 300ms, t0 + 1300ms, false) == action::none);
  // Nothing was waiting behind the stall: the next tick decides.
  CHECK(a.tick(t0 + 1400ms, false) == action::peer_dead);
  CHECK(b.tick(t0 + 1400ms, false) == action::peer_dead);

  // In use: its own liveness decides, with the same hold.
  connection_liveness c(100ms, 100ms, t0);
  share_all({&c});
  CHECK(c.tick(t0 + 100ms, true) == action::none);  // the work begins: its own check restarts
  CHECK(c.tick(t0 + 200ms, true) == action::send_ping);
  CHECK(c.tick(t0 + 300ms, t0 + 1300ms, true) == action::none);  // late: held
  c.on_pong(c.ping_value());                                     // the answer the stall hid
  CHECK(c.tick(t0 + 1400ms, true) == action::none);
}

TEST_CASE("connection_liveness: a silent path used now and then stays checked until found", "[liveness]") {
  connection_liveness a(100ms, 100ms, t0), b(100ms, 100ms, t0);
  share_all({&a, &b});
  CHECK(a.tick(t0 + 100ms, false) == action::none);
  CHECK(b.tick(t0 + 100ms, true) == action::none);  // a short call begins: b checks itself
  a.on_received();
  CHECK(a.tick(t0 + 200ms, false) == action::none);
  CHECK(b.tick(t0 + 200ms, false) == action::send_ping);  // the call ended (its deadline) unanswered
  a.on_received();
  CHECK(a.tick(t0 + 300ms, false) == action::none);
  CHECK(b.tick(t0 + 300ms, true) == action::peer_dead);  // still its own check, not restarted
}

TEST_CASE("connection_liveness: a connection whose path answered goes back to sharing", "[liveness]") {
  connection_liveness a(100ms, 100ms, t0), b(100ms, 100ms, t0);
  share_all({&a, &b});
  CHECK(a.tick(t0 + 100ms, false) == action::none);
  CHECK(b.tick(t0 + 100ms, true) == action::none);
  b.on_received();  // its reply
  CHECK(a.tick(t0 + 200ms, false) == action::none);
  CHECK(b.tick(t0 + 200ms, false) == action::none);  // shared again
  // Both share one ping from here on.
  CHECK(a.tick(t0 + 300ms, false) == action::send_ping);
  CHECK(b.tick(t0 + 300ms, false) == action::send_ping);
  a.on_received();
  b.on_received();
  CHECK(a.tick(t0 + 400ms, false) == action::none);
  CHECK(b.tick(t0 + 400ms, false) == action::none);
}

TEST_CASE(
    "connection_liveness: transport activity without a whole frame is a sign of life, an unchanged count is "
    "not",
    "[liveness]") {
  connection_liveness live(100ms, 100ms, t0);
  // A long message arriving (or the peer taking our backlog): the count moves every tick, no
  // frame completes, and no ping is needed however long it lasts.
  std::uint64_t activity = 0;
  for (int tick = 1; tick <= 10; ++tick) {
    live.note_activity(++activity);
    CHECK(live.tick(t0 + tick * 100ms, true) == action::none);
  }
  // It stops moving: silence as before, a ping, then the peer is dead.
  live.note_activity(activity);
  CHECK(live.tick(t0 + 1100ms, true) == action::send_ping);
  live.note_activity(activity);
  CHECK(live.tick(t0 + 1200ms, true) == action::peer_dead);
}

TEST_CASE("connection_liveness: transport activity answers an outstanding ping, on each carrier's own path",
          "[liveness]") {
  connection_liveness a(100ms, 100ms, t0), b(100ms, 100ms, t0);
  CHECK(a.tick(t0 + 100ms, false) == action::send_ping);
  a.note_activity(7);  // the pong waits behind the rest of a long reply still arriving
  CHECK(a.tick(t0 + 200ms, false) == action::none);
  share_all({&a, &b});
  CHECK(a.tick(t0 + 300ms, false) == action::none);
  CHECK(b.tick(t0 + 300ms, false) == action::none);
  CHECK(a.tick(t0 + 400ms, false) == action::send_ping);
  CHECK(b.tick(t0 + 400ms, false) == action::send_ping);
  a.note_activity(7);  // unchanged: nothing new on a's path
  b.note_activity(1);
  CHECK(b.tick(t0 + 500ms, false) == action::none);
  CHECK(a.tick(t0 + 500ms, false) == action::peer_dead);  // carried the ping, its own path silent
}

// --- Skipped ticks (heard_by, next_due): heartbeat_ticker sleeps until a connection can act ------

TEST_CASE("liveness: next_due is the first instant a tick can act", "[liveness]") {
  liveness l(300ms, 300ms, t0);
  CHECK(l.next_due() == t0 + 300ms);  // silence for the interval: a ping
  l.on_received();                    // untimed: only the next tick can record it
  CHECK(l.next_due() == liveness::clock::time_point::min());
  l.heard_by(t0 + 300ms);  // the same frame, timed: heard at its slot's end
  CHECK(l.next_due() == t0 + 600ms);
  CHECK(l.tick(t0 + 600ms) == action::send_ping);             // the tick at 300 ms was skipped: same decision
  CHECK(l.next_due() == liveness::clock::time_point::min());  // its answer is awaited every tick
  l.on_pong(l.ping_value());
  l.heard_by(t0 + 900ms);
  CHECK(l.next_due() == t0 + 1200ms);
  // Deferring to a peer that pings: its ping is overdue only interval + timeout + a period later.
  l.on_peer_ping();
  l.heard_by(t0 + 900ms);
  CHECK(l.next_due() == t0 + 900ms + 900ms);
  CHECK(liveness(0ms, 300ms, t0).next_due() == liveness::clock::time_point::max());  // heartbeats off
}

TEST_CASE("liveness: an untimed frame after a timed one is heard at its own tick", "[liveness]") {
  liveness l(300ms, 300ms, t0);
  l.on_pong(0);
  l.heard_by(t0 + 300ms);
  l.on_received();  // a later frame, which only a tick can time
  CHECK(l.next_due() == liveness::clock::time_point::min());
  CHECK(l.tick(t0 + 600ms) == action::none);  // heard at 600 ms, not 300
  CHECK(l.tick(t0 + 900ms) == action::send_ping);
}

namespace {

// One connection end's heartbeats over `until`, ticked as heartbeat_ticker ticks it: every grid
// instant, or (skipping) only at next_due and when on_received or work_begins asks for the next
// instant, with pings and pongs timed by heard_by. The peer answers each ping 1 ms later while it
// lives (until `peer_dies`), pings itself at `peer_pings` (a channel's pings, for a server), and
// sends other frames at `frames`; this side has calls in flight during `busy`. What this side did:
// its pings' instants, and when it found the peer dead.
struct heartbeat_run {
  std::vector<liveness::clock::time_point> pings;
  liveness::clock::time_point dead = liveness::clock::time_point::max();
  int ticks = 0;
};

struct heartbeat_script {
  liveness::clock::time_point peer_dies;
  std::vector<liveness::clock::time_point> peer_pings, frames;
  std::pair<liveness::clock::time_point, liveness::clock::time_point> busy{};
  bool shared = false;
};

constexpr liveness::clock::duration period = 300ms;  // interval and timeout: the defaults

heartbeat_run run_heartbeats(const heartbeat_script& s, bool skipping) {
  using clock = liveness::clock;
  const auto grid_after = [](clock::time_point t) { return liveness::next_grid_instant(t, period, {}); };
  connection_liveness live(period, period, t0);
  connection_liveness other(period, period, t0);  // a second idle member, when shared
  if (s.shared) share_all({&live, &other});
  heartbeat_run out;
  std::vector<std::pair<clock::time_point, int>> events;  // 0 peer ping, 1 frame, 2 pong, 3 work begins
  for (const auto t : s.peer_pings) events.emplace_back(t, 0);
  for (const auto t : s.frames) events.emplace_back(t, 1);
  if (s.busy.first != clock::time_point{}) events.emplace_back(s.busy.first, 3);
  const auto in_use = [&](clock::time_point t) { return t >= s.busy.first && t < s.busy.second; };
  auto next_tick = grid_after(t0);
  const auto due_to_next = [&](clock::time_point due, clock::time_point next) {
    return due <= next ? next : liveness::next_grid_instant(due - clock::duration(1), period, {});
  };
  const auto until = t0 + 20s;
  while (next_tick < until && out.dead == clock::time_point::max()) {
    std::sort(events.begin(), events.end());
    if (!events.empty() && events.front().first < next_tick) {
      const auto [t, kind] = events.front();
      events.erase(events.begin());
      if (t >= s.peer_dies && kind != 3) continue;  // a dead peer sends nothing
      const auto slot_end = grid_after(t);
      if (kind == 3) {
        if (skipping && live.work_begins()) next_tick = grid_after(t);
        continue;
      }
      const bool heartbeat = kind != 1;
      const bool wake = live.on_received();
      if (kind == 0) live.on_peer_ping();
      if (kind == 2) live.on_pong(live.ping_value());
      if (!skipping) continue;
      if (!heartbeat) {
        if (wake) next_tick = grid_after(t);
        continue;
      }
      live.heard_by(slot_end, 0);
      next_tick = due_to_next(live.next_due(in_use(t), slot_end), grid_after(t));
      continue;
    }
    const auto instant = next_tick;
    ++out.ticks;
    const auto a = live.tick(instant, in_use(instant));
    if (s.shared) (void)other.tick(instant, false);
    if (a == action::send_ping) {
      out.pings.push_back(instant);
      events.emplace_back(instant + 1ms, 2);
    }
    if (a == action::peer_dead) out.dead = instant;
    next_tick = instant + period;
    if (skipping) next_tick = due_to_next(live.next_due(in_use(instant), next_tick), next_tick);
  }
  return out;
}

void check_same_decisions(const heartbeat_script& s) {
  const auto every = run_heartbeats(s, false), skipping = run_heartbeats(s, true);
  CHECK(skipping.pings == every.pings);
  CHECK(skipping.dead == every.dead);
  CHECK(every.dead != liveness::clock::time_point::max());  // the peer's death was found
  CHECK(skipping.ticks < every.ticks);
}

}  // namespace

TEST_CASE("connection_liveness: skipping the ticks that only record decides as ticking them all",
          "[liveness]") {
  SECTION("a client pinging an idle server, which dies") {
    check_same_decisions({.peer_dies = t0 + 7s + 450ms});
    check_same_decisions({.peer_dies = t0 + 7s + 610ms});
  }
  SECTION("the same, shared with another idle connection to that server") {
    check_same_decisions({.peer_dies = t0 + 7s + 450ms, .shared = true});
  }
  SECTION("a server deferring to its client's pings; the client dies") {
    heartbeat_script s{.peer_dies = t0 + 9s + 100ms};
    for (auto t = t0 + 5ms; t < t0 + 10s; t += 600ms) s.peer_pings.push_back(t);
    check_same_decisions(s);
    s.shared = true;
    check_same_decisions(s);
  }
  SECTION("other frames now and then, untimed") {
    heartbeat_script s{.peer_dies = t0 + 12s + 20ms,
                       .frames = {t0 + 2s + 40ms, t0 + 4s + 350ms, t0 + 4s + 420ms}};
    for (auto t = t0 + 5ms; t < t0 + 6s; t += 600ms) s.peer_pings.push_back(t);
    check_same_decisions(s);
  }
  SECTION("calls begin on a shared idle connection whose peer then dies") {
    heartbeat_script s{.peer_dies = t0 + 5s + 10ms, .busy = {t0 + 5s + 20ms, t0 + 20s}, .shared = true};
    check_same_decisions(s);
    s.busy = {t0 + 4s + 700ms, t0 + 20s};  // begun while the peer still answered
    check_same_decisions(s);
  }
}

TEST_CASE("connection_liveness: asks for the next tick once, when its ticks are skipped", "[liveness]") {
  connection_liveness live(300ms, 300ms, t0);
  CHECK_FALSE(live.on_received());  // nothing skipped yet
  CHECK(live.tick(t0 + 300ms, false) == action::none);
  CHECK(live.next_due(false, t0 + 600ms) == t0 + 600ms);  // not past the next instant
  CHECK_FALSE(live.on_received());
  (void)live.tick(t0 + 600ms, false);
  live.on_pong(0);
  live.heard_by(t0 + 900ms, 0);
  CHECK(live.next_due(false, t0 + 900ms) == t0 + 1200ms);  // the tick at 900 ms is skipped
  CHECK_FALSE(live.work_begins());                         // unshared: calls change nothing
  CHECK(live.on_received());                               // an untimed frame: the next instant after all
  CHECK_FALSE(live.on_received());                         // once
  // Shared and idle, calls beginning ask too, and in use it needs every tick.
  connection_liveness a(300ms, 300ms, t0), b(300ms, 300ms, t0);
  share_all({&a, &b});
  a.on_pong(0);
  a.heard_by(t0 + 300ms, 0);
  CHECK(a.next_due(false, t0 + 300ms) == t0 + 600ms);
  CHECK(a.work_begins());
  CHECK(a.next_due(true, t0 + 300ms) == liveness::clock::time_point::min());
  // Transport activity already seen when a heartbeat frame was timed is no news to a tick.
  connection_liveness c(300ms, 300ms, t0);
  c.on_pong(0);
  c.heard_by(t0 + 300ms, 5);
  c.note_activity(5);
  CHECK(c.tick(t0 + 600ms, false) == action::send_ping);  // last heard at 300 ms
}

TEST_CASE(
    "connection_liveness: transport activity found after skipped ticks counts from the first skipped one",
    "[liveness]") {
  connection_liveness live(300ms, 300ms, t0);  // a server whose client pings
  live.on_peer_ping();
  live.heard_by(t0 + 300ms, 0);
  CHECK(live.tick(t0 + 300ms, false) == action::none);
  REQUIRE(live.next_due(false, t0 + 600ms) == t0 + 1200ms);  // deferring: 600 and 900 ms skipped
  // Bytes of a long request arrived at some time since: counted from 600 ms, the earliest it can
  // have been, so the ping (if the bytes stop) is not late; a tick at every instant might have
  // seen them first at 600 ms too.
  live.note_activity(1);
  CHECK(live.tick(t0 + 1200ms, false) == action::none);
  CHECK(live.next_due(false, t0 + 1500ms) == t0 + 600ms + 900ms);
  live.note_activity(1);  // no more
  CHECK(live.tick(t0 + 1500ms, false) == action::send_ping);
}
