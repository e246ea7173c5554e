// connection_lifecycle without verbs: every way an rdma connection can go from idle to shut down,
// and the close reason a disconnect gets in each state.
#include "transport/rdma/connection_lifecycle.hpp"

#include <catch2/catch.hpp>

using rdmarpc::transport::errc;
using rdmarpc::transport::rdma::connection_lifecycle;
using state = connection_lifecycle::state;

TEST_CASE("lifecycle: an orderly close flushes - says goodbye - drains - shuts down") {
  connection_lifecycle l;
  CHECK(l.current() == state::idle);
  REQUIRE(l.start());
  CHECK(l.is_open());
  CHECK(l.is_sending());
  CHECK(l.close() == connection_lifecycle::close_action::flush);
  CHECK(l.current() == state::flushing);
  CHECK(l.is_closing());
  CHECK(l.is_sending());
  CHECK_FALSE(l.is_open());
  CHECK(l.close() == connection_lifecycle::close_action::none);  // idempotent
  l.goodbye_posted();
  CHECK(l.current() == state::goodbye_sent);
  CHECK(l.disconnect_reason() == errc::closed_locally);  // both sides closing at once: ours
  CHECK(l.end(make_error_code(errc::closed_locally)) == connection_lifecycle::end_action::drain);
  CHECK(l.current() == state::draining);
  CHECK(l.has_ended());
  CHECK_FALSE(l.is_sending());
  CHECK(l.reason() == errc::closed_locally);
  CHECK(l.shut_down());
  CHECK(l.is_shut_down());
  CHECK_FALSE(l.shut_down());
}

TEST_CASE("lifecycle: close before start ends at once and start then reports it") {
  connection_lifecycle l;
  CHECK(l.close() == connection_lifecycle::close_action::end_now);
  CHECK(l.end(make_error_code(errc::closed_locally)) == connection_lifecycle::end_action::shut_down_now);
  CHECK(l.current() == state::draining);
  CHECK(l.shut_down());
  CHECK_FALSE(l.start());
  CHECK(l.reason() == errc::closed_locally);
}

TEST_CASE("lifecycle: the first end wins and later ones are ignored") {
  connection_lifecycle l;
  REQUIRE(l.start());
  CHECK(l.end(make_error_code(errc::connection_lost)) == connection_lifecycle::end_action::drain);
  CHECK(l.end(make_error_code(errc::closed_locally)) == connection_lifecycle::end_action::ignored);
  CHECK(l.reason() == errc::connection_lost);
  CHECK(l.close() == connection_lifecycle::close_action::none);
  l.goodbye_posted();  // no effect once ended
  CHECK(l.current() == state::draining);
}

TEST_CASE("lifecycle: a disconnect is closed_by_peer after the peer's goodbye - else connection_lost") {
  connection_lifecycle l;
  REQUIRE(l.start());
  CHECK(l.disconnect_reason() == errc::connection_lost);
  l.peer_said_goodbye();
  CHECK(l.disconnect_reason() == errc::closed_by_peer);
  CHECK(l.close() == connection_lifecycle::close_action::flush);
  CHECK(l.disconnect_reason() == errc::closed_locally);  // we asked first
}

TEST_CASE("lifecycle: whatever ends a connection after close() ends it as closed_locally") {
  connection_lifecycle flushing;
  REQUIRE(flushing.start());
  REQUIRE(flushing.close() == connection_lifecycle::close_action::flush);
  // A send of the flush failed (the peer died meanwhile): still our close.
  CHECK(flushing.end(make_error_code(errc::connection_lost)) == connection_lifecycle::end_action::drain);
  CHECK(flushing.reason() == errc::closed_locally);
  connection_lifecycle goodbye;
  REQUIRE(goodbye.start());
  REQUIRE(goodbye.close() == connection_lifecycle::close_action::flush);
  goodbye.goodbye_posted();
  CHECK(goodbye.end(make_error_code(errc::port_down)) == connection_lifecycle::end_action::drain);
  CHECK(goodbye.reason() == errc::closed_locally);
}

TEST_CASE("lifecycle: goodbye_posted only counts while flushing") {
  connection_lifecycle l;
  l.goodbye_posted();
  CHECK(l.current() == state::idle);
  REQUIRE(l.start());
  l.goodbye_posted();
  CHECK(l.current() == state::open);
}

TEST_CASE("lifecycle: destroying a connection shuts it down from any state") {
  connection_lifecycle open;
  REQUIRE(open.start());
  CHECK(open.shut_down());
  CHECK(open.is_shut_down());
  CHECK(open.has_ended());
}
