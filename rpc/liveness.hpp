#pragma once
// liveness: the heartbeat state machine of one connection end (docs/wire-format.md, Heartbeats),
// and ping_policer, a server's bound on how often a client may ping. Pure: no I/O, no clock of its
// own (every input takes `now`), so tests drive every transition by hand.
// Layer: rpc. Threading: not thread-safe; one per connection on its executor (through
// rpc/connection_heartbeats.hpp, for the channel's endpoints and the server's connections).

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

namespace rdmarpc {

class liveness {
 public:
  using clock = std::chrono::steady_clock;

  enum class action : std::uint8_t {
    none,
    send_ping,  // send a ping carrying ping_value()
    peer_dead,  // nothing received for the interval, then no answer within the timeout
  };

  // interval: silence after which a ping goes out; timeout: how long that ping may stay
  // unanswered. A zero or max() interval or timeout disables heartbeats.
  liveness(clock::duration interval, clock::duration timeout, clock::time_point now) noexcept
      : interval_(interval), timeout_(timeout), last_heard_(now) {}

  bool enabled() const noexcept {
    return interval_ > clock::duration::zero() && timeout_ > clock::duration::zero() &&
           interval_ != clock::duration::max() && timeout_ != clock::duration::max();
  }

  // How often tick() should run: the shorter of interval and timeout (300 ms for both by default),
  // so detection takes at most interval + timeout + period when they are multiples of it (900 ms
  // by default; a period more after a stall of the process, up to two while ticks keep running
  // late: ping_stamp, holds_verdict). Fewer ticks would stretch that bound; more would only cost CPU.
  clock::duration tick_period() const noexcept {
    return std::max<clock::duration>(std::min(interval_, timeout_), std::chrono::milliseconds(1));
  }

  // When the tick after `now` is due: on a grid of the period on the clock's own scale, shifted by
  // `phase`, so every connection of an executor with the same settings ticks at the same instant
  // and one timer wake-up serves them all (a hundred idle connections cost a few wake-ups a second,
  // not hundreds). Servers use half a period as phase: a client and its server then never decide
  // to ping at the same instant (which would send two pings where one does).
  clock::time_point next_tick(clock::time_point now, clock::duration phase = {}) const noexcept {
    return next_grid_instant(now, tick_period(), phase);
  }

  // The first instant after `now` on the grid of `period` on the clock's own scale, shifted by
  // `phase` (heartbeat_ticker's timers run on it).
  static clock::time_point next_grid_instant(clock::time_point now, clock::duration period,
                                             clock::duration phase) noexcept {
    const auto shifted = now.time_since_epoch() - phase % period;
    return clock::time_point(shifted - shifted % period + period + phase % period);
  }

  // Any frame arrived. Called per message, so it only sets a flag; tick() looks at it.
  void on_received() noexcept { received_ = heard::at_tick; }

  // The frame just passed to on_received, on_peer_ping or on_pong arrived before `slot_end`, the
  // first grid instant after it (the caller read the clock: heartbeat frames are a few a second, not
  // per message). It counts as heard at slot_end, as the tick there would record, so that tick need
  // not run (next_due). Frames before it that no tick recorded yet arrived earlier still; the tick
  // that finally runs records the earlier of slot_end and its own instant.
  void heard_by(clock::time_point slot_end) noexcept {
    received_ = heard::stamped;
    stamp_ = slot_end;
  }

  // The peer pinged (a server calls this for a client's pings; a channel never does). While the
  // peer keeps pinging, its pings and our pongs prove both ends alive, so this side stops pinging
  // on its own: it waits a longer silence, interval + timeout + one tick period (the peer's next
  // ping is then overdue with the same settings), before it pings itself. An idle connection
  // then carries one ping and one pong per period instead of up to two of each. A peer that stops
  // pinging (heartbeats off, or dead) gets this side's own pings again after that silence.
  void on_peer_ping() noexcept {
    on_received();
    peer_pings_ = true;
  }

  // A pong arrived (a frame: on_received too). One echoing our outstanding ping answers it at once.
  void on_pong(std::uint64_t value) noexcept {
    on_received();
    if (outstanding_ && value == ping_value_) outstanding_ = false;
  }

  // Periodic: only received traffic is a sign of life (calls waiting for replies are not).
  // `instant`: the tick's scheduled instant on the next_tick grid, on which every silence and
  // timeout is judged (timer latency differs from tick to tick, and a silence measured a few
  // microseconds short of the interval would cost a whole period: judged on when the ticks ran,
  // detection measured 1.2 s, not 0.9). `ran_at`: when the tick ran;
  // only a tick that ran late uses it, for the ping it sends (ping_stamp) and the verdict on one
  // that is overdue (holds_verdict).
  action tick(clock::time_point instant, clock::time_point ran_at) noexcept {
    if (!enabled()) return action::none;
    if (received_ != heard::nothing) {
      // Something arrived since the last tick: the peer lives, heard at this instant (no ping is
      // needed then), or at a stamp from heard_by when the instants between were skipped.
      last_heard_ = received_ == heard::stamped ? std::min(stamp_, instant) : instant;
      received_ = heard::nothing;
      outstanding_ = false;
    } else if (outstanding_) {
      if (instant - ping_sent_ < timeout_) return action::none;
      if (holds_verdict(instant, ran_at, verdict_held_)) return action::none;
      return action::peer_dead;
    }
    if (instant - last_heard_ < silence_allowed()) return action::none;
    peer_pings_ = false;  // its next ping is overdue: from now on this side pings at its interval
    outstanding_ = true;
    verdict_held_ = false;
    ping_sent_ = ping_stamp(instant, ran_at);
    ++ping_value_;
    return action::send_ping;
  }
  // A tick that ran on time.
  action tick(clock::time_point instant) noexcept { return tick(instant, instant); }

  // Something arrived at some time after `since` (a grid instant), the caller cannot tell when:
  // heard at since unless a frame already counts (as late or later).
  void heard_after(clock::time_point since) noexcept {
    if (received_ != heard::nothing) return;
    received_ = heard::stamped;
    stamp_ = since;
  }

  // The first instant at which tick() can act: ping, or find the peer dead. The ticks before it
  // would only record what was heard, so heartbeat_ticker may skip their instants: a lone idle
  // connection wakes its thread only to ping (or, deferring to a peer's pings, not at all). min():
  // the next instant, because a frame arrived that only a tick can time (on_received without
  // heard_by), or a ping waits for its answer (whose fate can change from outside: forget_ping).
  // max(): never (heartbeats off).
  clock::time_point next_due() const noexcept {
    if (!enabled()) return clock::time_point::max();
    if (received_ == heard::at_tick) return clock::time_point::min();
    if (received_ == heard::stamped) return stamp_ + silence_allowed();
    if (outstanding_) return clock::time_point::min();
    return last_heard_ + silence_allowed();
  }

  // A tick that ran more than a quarter period (timer latency) after its instant: the process
  // stalled (CPU throttling, swapping, a debugger).
  bool late(clock::time_point instant, clock::time_point ran_at) const noexcept {
    return ran_at - instant > tick_period() / 4;
  }

  // The grid instant from which a ping sent by the tick of `instant`, which ran at `ran_at`, is
  // timed. On time: `instant`, so a timeout of k periods is judged exactly k ticks later. Late: the
  // first grid instant at or after `ran_at` (the ping went out a little after that, as the round
  // reached it), so the pong gets the timeout of real time less that; timed from the long-past
  // instant it could get none, and a live peer would be declared dead.
  clock::time_point ping_stamp(clock::time_point instant, clock::time_point ran_at) const noexcept {
    if (!late(instant, ran_at)) return instant;
    const auto period = tick_period();
    return instant + ((ran_at - instant + period - clock::duration(1)) / period) * period;
  }

  // Whether a late tick holds back its peer_dead verdict on a ping that is overdue: frames that
  // arrived during the stall (the pong among them) may not have been read yet, and the next tick,
  // which runs after them, decides. Once per ping (`held`), so a process whose every tick runs late
  // still finds a dead peer, a period later.
  bool holds_verdict(clock::time_point instant, clock::time_point ran_at, bool& held) const noexcept {
    if (held || !late(instant, ran_at)) return false;
    held = true;
    return true;
  }

  // A ping that found no send room was not sent: the timeout still runs (a peer that stopped
  // reading or granting credits is as good as dead), so nothing changes here.

  std::uint64_t ping_value() const noexcept { return ping_value_; }
  bool ping_outstanding() const noexcept { return outstanding_; }
  // The grid instant the last ping is timed from (ping_stamp).
  clock::time_point ping_sent_at() const noexcept { return ping_sent_; }
  // Something arrived since the last tick.
  bool heard_since_tick() const noexcept { return received_ != heard::nothing; }

  // Starts over as if just heard from at `now` (the ping counter runs on, so a late pong of an
  // earlier ping is not taken for one of the next).
  void restart(clock::time_point now) noexcept {
    last_heard_ = now;
    received_ = heard::nothing;
    outstanding_ = peer_pings_ = false;
  }

  // The outstanding ping will never be answered where it went (its connection ended): the next
  // tick pings again if the silence still calls for it.
  void forget_ping() noexcept { outstanding_ = false; }

 private:
  // What arrived since the last tick: nothing, frames only a tick can time, or frames the last of
  // which heard_by stamped (covering every earlier one), or activity heard_after stamped.
  enum class heard : std::uint8_t { nothing, at_tick, stamped };

  // How long a silence may last before this side pings.
  clock::duration silence_allowed() const noexcept {
    return peer_pings_ ? interval_ + timeout_ + tick_period() : interval_;
  }

  clock::duration interval_;
  clock::duration timeout_;
  clock::time_point last_heard_;
  clock::time_point ping_sent_{};
  clock::time_point stamp_{};     // heard_by's or heard_after's, while received_ is stamped
  std::uint64_t ping_value_ = 0;  // opaque on the wire; a counter tells a late pong from a fresh one
  heard received_ = heard::nothing;
  bool outstanding_ = false;
  bool verdict_held_ = false;  // a late tick held back the outstanding ping's verdict
  bool peer_pings_ = false;    // the peer pinged since our last ping: we need not ping
};

// The liveness of every connection from one heartbeat grid (a heartbeat_ticker group: one
// executor, one tick period and phase) to one peer heartbeat domain (the peer's grid, named in its
// pings and pongs: docs/wire-format.md, Heartbeat domains) while they are idle. A hung host, a
// stopped process or a cut link silences all of those connections at once, so a ping through two
// of them answers for all, and any frame received on any of them is a sign of life for all: 100
// idle connections between two processes cost two exchanges per period, not 100 (eRPC's
// heartbeats are per remote process too). Two carriers, not one: a failed path of one of them
// (one ECMP route) ends only that connection (connection_liveness), since the other answers.
// Layer: rpc. Threading: not thread-safe; its members all run on the grid's executor.
class peer_liveness {
 public:
  using clock = liveness::clock;
  static constexpr std::size_t kCarriers = 2;  // members a shared ping goes through

  peer_liveness(clock::duration interval, clock::duration timeout, clock::time_point now) noexcept
      : live_(interval, timeout, now), interval_(interval), timeout_(timeout) {}

  liveness& state() noexcept { return live_; }
  const liveness& state() const noexcept { return live_; }

  // Connections with different settings keep their own.
  bool same_settings(const peer_liveness& other) const noexcept {
    return interval_ == other.interval_ && timeout_ == other.timeout_;
  }

  // One idle member connection's tick at the grid `instant` (run at `ran_at`: liveness::tick);
  // `member` identifies it (any unique
  // token, e.g. its address). The first member to tick at an instant ticks the shared state; a
  // ping goes out through the first kCarriers members to tick (or the next ones after
  // member_ping_not_sent), and peer_dead reaches every member, which all end.
  liveness::action member_tick(clock::time_point instant, clock::time_point ran_at,
                               const void* member) noexcept {
    if (instant != decided_at_) {
      decided_at_ = instant;
      decided_ = live_.tick(instant, ran_at);
      if (decided_ == liveness::action::send_ping) carriers_ = {};  // a new ping, new carriers
    }
    if (decided_ != liveness::action::send_ping) return decided_;
    for (auto& c : carriers_) {
      if (c == nullptr) {
        c = member;
        return liveness::action::send_ping;
      }
    }
    return liveness::action::none;
  }
  liveness::action member_tick(clock::time_point instant, const void* member) noexcept {
    return member_tick(instant, instant, member);
  }

  // The member given send_ping had no send room: the next member ticking at the same instant
  // carries it instead (the timeout runs from the ping's stamp regardless).
  void member_ping_not_sent(const void* member) noexcept { drop_carrier(member); }

  // A member's connection ended. When no carrier of the outstanding ping is left, its pong will
  // never be read: forget it, so the next instant pings through other members instead of
  // declaring them all dead at its timeout (detection of a dead peer then takes a tick longer).
  void member_left(const void* member) noexcept {
    if (member == nullptr || !drop_carrier(member)) return;
    const bool carried = std::any_of(carriers_.begin(), carriers_.end(), [](auto c) { return c != nullptr; });
    if (!carried && live_.ping_outstanding()) live_.forget_ping();
  }

 private:
  bool drop_carrier(const void* member) noexcept {
    for (auto& c : carriers_) {
      if (c == member) {
        c = nullptr;
        return true;
      }
    }
    return false;
  }

  liveness live_;
  clock::duration interval_;
  clock::duration timeout_;
  clock::time_point decided_at_ = clock::time_point::min();  // the instant decided_ is for
  liveness::action decided_ = liveness::action::none;
  std::array<const void*, kCarriers> carriers_{};  // of the last shared ping
};

// The heartbeats of one connection end: its own liveness, and the peer_liveness it shares with
// the grid's other connections to the same peer once an exchange named the peer's domain.
// - Not shared: its own liveness decides, as for any connection.
// - Shared and idle: the shared state decides; when this connection carried the shared ping and
//   heard nothing itself within the timeout, it ends alone (its path failed; the other carrier
//   answered, or everyone ends anyway).
// - Shared and carrying calls or streams: its own liveness decides (its path may be the one that
//   failed while the others answer), restarted when the work begins, so what waits ends within
//   interval + timeout + a tick of the silence. It keeps checking itself after the work ended
//   until it heard something, so a failed path used now and then is still found.
// Layer: rpc. Threading: not thread-safe; on its connection's executor.
class connection_liveness {
 public:
  using clock = liveness::clock;

  connection_liveness(clock::duration interval, clock::duration timeout, clock::time_point now) noexcept
      : interval_(interval), timeout_(timeout), own_(interval, timeout, now), last_tick_(now) {}
  connection_liveness(const connection_liveness&) = delete;
  connection_liveness& operator=(const connection_liveness&) = delete;
  ~connection_liveness() { leave(); }

  bool enabled() const noexcept { return own_.enabled(); }
  clock::duration tick_period() const noexcept { return own_.tick_period(); }
  bool shared() const noexcept { return shared_ != nullptr; }

  // Any frame arrived (per message: two flags). True once when the ticker skips instants for this
  // connection (next_due) and must tick at the next one after all: only a tick can time this frame.
  bool on_received() noexcept {
    own_.on_received();
    if (shared_) shared_->state().on_received();
    return take_skipping();
  }
  // The frame just passed to on_received, on_peer_ping or on_pong (a ping or pong) arrived before
  // the grid instant `slot_end` (liveness::heard_by). `peer_activity` as for note_activity, read
  // now: the activity so far (this frame's bytes among it) arrived before slot_end too, and a tick
  // that sees it must not take it for news it can only time at its own instant.
  void heard_by(clock::time_point slot_end, std::uint64_t peer_activity) noexcept {
    activity_seen_ = peer_activity;
    own_.heard_by(slot_end);
    if (shared_) shared_->state().heard_by(slot_end);
  }
  // Calls or a stream begin on this connection. True once when the ticker skips instants for it and
  // must tick at the next one: a shared connection's own checks begin at that tick.
  bool work_begins() noexcept { return shared_ != nullptr && take_skipping(); }
  // The transport's connection_stats::peer_activity, read just before each tick: when it moved,
  // the peer lives although no whole frame arrived (one long message in either direction: bytes of
  // it arriving, or the peer taking ours while our ping waits behind them).
  // When it moved is unknown, only that it was after the last tick that ran: it counts as heard at
  // the first instant after that tick (the instant about to tick, unless the ticker skipped some),
  // which may be early, so a ping may go out early, never late.
  void note_activity(std::uint64_t peer_activity) noexcept {
    if (peer_activity == activity_seen_) return;
    activity_seen_ = peer_activity;
    const auto since = last_tick_ + own_.tick_period();
    own_.heard_after(since);
    if (shared_) shared_->state().heard_after(since);
  }
  void on_peer_ping() noexcept {
    own_.on_peer_ping();
    if (shared_) shared_->state().on_peer_ping();
  }
  void on_pong(std::uint64_t value) noexcept {
    own_.on_pong(value);
    if (shared_) shared_->state().on_pong(value);
  }

  // Joins `with` (what heartbeat_ticker::subscription::share returned for the peer's domain).
  void share(std::shared_ptr<peer_liveness> with) noexcept {
    leave();
    shared_ = std::move(with);
    if (shared_) shared_->state().on_received();  // we share because a heartbeat frame just arrived
  }

  // A tick on the grid `instant`, run at `ran_at` (liveness::tick). `in_use`: the connection
  // carries calls or streams.
  liveness::action tick(clock::time_point instant, clock::time_point ran_at, bool in_use) noexcept {
    last_tick_ = instant;
    last_was_shared_ = false;
    if (!shared_) return own_tick(instant, ran_at);
    const bool heard = own_.heard_since_tick();
    if (in_use || own_checking_) {
      if (!own_checking_) {
        own_.restart(instant);  // the wait starts now
        own_checking_ = true;
        heard_while_checking_ = false;
        carried_ping_ = false;
      } else if (heard) {
        heard_while_checking_ = true;
      }
      if (in_use || !heard_while_checking_) return own_tick(instant, ran_at);
      own_checking_ = false;  // idle, and its path answered: back to the shared state
    }
    if (heard) {
      own_.restart(instant);  // clears the flag
      carried_ping_ = false;
    } else if (carried_ping_ && instant - carried_at_ >= timeout_ &&
               !own_.holds_verdict(instant, ran_at, carried_verdict_held_)) {
      carried_ping_ = false;
      return liveness::action::peer_dead;  // our path did not answer our ping
    }
    last_was_shared_ = true;
    const auto a = shared_->member_tick(instant, ran_at, this);
    if (a == liveness::action::send_ping) {
      ping_value_ = shared_->state().ping_value();
      if (!carried_ping_) {  // the silence on our path counts from our first unanswered ping
        carried_ping_ = true;
        carried_verdict_held_ = false;
        carried_at_ = shared_->state().ping_sent_at();
      }
    }
    return a;
  }
  // A tick that ran on time.
  liveness::action tick(clock::time_point instant, bool in_use) noexcept {
    return tick(instant, instant, in_use);
  }

  // The first instant at which tick() can act (liveness::next_due), after a tick or heard_by;
  // `next_instant`: the grid instant after that tick, or heard_by's slot_end. `in_use` as for
  // tick(). Past next_instant, the ticker skips the instants before it: then on_received and
  // work_begins say when it must tick sooner.
  clock::time_point next_due(bool in_use, clock::time_point next_instant) noexcept {
    clock::time_point due;
    if (!shared_) {
      due = own_.next_due();
    } else if (in_use || own_checking_) {
      due = clock::time_point::min();  // its own checks: every instant
    } else {
      due = shared_->state().next_due();
      // A shared ping it carried, which its own path has not answered yet: judged at the timeout.
      if (carried_ping_ && !own_.heard_since_tick()) due = std::min(due, carried_at_ + timeout_);
    }
    skipping_ = due > next_instant;
    return due;
  }

  // What the ping that tick() asked for carries.
  std::uint64_t ping_value() const noexcept { return ping_value_; }

  // The ping tick() asked for found no send room (a shared one goes to the next member).
  void ping_not_sent() noexcept {
    if (!last_was_shared_ || !shared_) return;
    carried_ping_ = false;
    shared_->member_ping_not_sent(this);
  }

  // The connection ended: a shared ping it carried is forgotten (peer_liveness::member_left), and
  // the shared state is let go.
  void leave() noexcept {
    if (shared_) shared_->member_left(this);
    shared_.reset();
  }

  // A fresh shared state with this connection's settings, for heartbeat_ticker::subscription::share
  // to keep when this is the first connection to a peer domain.
  std::shared_ptr<peer_liveness> make_shareable(clock::time_point now) const {
    return std::make_shared<peer_liveness>(interval_, timeout_, now);
  }

 private:
  // Per message and call: a load and a branch, no store unless it was set.
  bool take_skipping() noexcept {
    if (!skipping_) [[likely]]
      return false;
    skipping_ = false;
    return true;
  }

  liveness::action own_tick(clock::time_point instant, clock::time_point ran_at) noexcept {
    const auto a = own_.tick(instant, ran_at);
    if (a == liveness::action::send_ping) ping_value_ = own_.ping_value();
    return a;
  }

  clock::duration interval_;
  clock::duration timeout_;
  liveness own_;
  std::shared_ptr<peer_liveness> shared_;
  clock::time_point last_tick_;  // the instant of the last tick that ran (note_activity)
  clock::time_point carried_at_{};
  std::uint64_t ping_value_ = 0;
  std::uint64_t activity_seen_ = 0;    // note_activity's last value
  bool own_checking_ = false;          // shared, but its own liveness decides (in use, or not yet heard)
  bool heard_while_checking_ = false;  // something arrived since own checking began
  bool carried_ping_ = false;          // it carried the shared ping sent at carried_at_
  bool carried_verdict_held_ = false;  // a late tick held back that ping's verdict (holds_verdict)
  bool last_was_shared_ = false;
  bool skipping_ = false;  // next_due reported an instant past the next one
};

// A server's bound on client pings, as gRPC's too_many_pings: a ping sooner than min_interval
// after the previous one is a strike; more than max_strikes strikes in a row and the client is cut
// off. A ping at a permitted distance clears the strikes (timer jitter alone never adds up).
class ping_policer {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr unsigned kDefaultMaxStrikes = 2;

  explicit ping_policer(clock::duration min_interval, unsigned max_strikes = kDefaultMaxStrikes) noexcept
      : min_interval_(min_interval), max_strikes_(max_strikes) {}

  // A ping arrived at `now`. True: too many pings, disconnect the client.
  bool on_ping(clock::time_point now) noexcept {
    const bool first = !seen_;
    seen_ = true;
    const auto gap = now - last_;
    last_ = now;
    if (first || min_interval_ <= clock::duration::zero() || gap >= min_interval_) {
      strikes_ = 0;
      return false;
    }
    return ++strikes_ > max_strikes_;
  }

  unsigned strikes() const noexcept { return strikes_; }

 private:
  clock::duration min_interval_;
  unsigned max_strikes_;
  clock::time_point last_{};
  unsigned strikes_ = 0;
  bool seen_ = false;
};

}  // namespace rdmarpc
