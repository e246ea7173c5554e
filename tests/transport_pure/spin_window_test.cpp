// Unit tests of the adaptive polling mode's spin window (transport/rdma/spin_window.hpp): how long
// cq_reactor polls after a completion, learnt from how long it slept.
#include "transport/rdma/spin_window.hpp"

#include <catch2/catch.hpp>
#include <chrono>

using rdmarpc::transport::rdma::spin_window;
using namespace std::chrono_literals;

TEST_CASE("spin_window: starts at the base spin", "[spin]") {
  const spin_window w(100us, 1000us);
  CHECK(w.window() == 100us);
}

TEST_CASE("spin_window: sleeps a longer spin would have saved grow it, up to the maximum", "[spin]") {
  spin_window w(100us, 1000us);
  w.woke_after(50us);  // sooner than the window
  CHECK(w.window() == 200us);
  w.woke_after(700us);  // longer than the window, still within the maximum
  CHECK(w.window() == 400us);
  w.woke_after(1000us);  // exactly the maximum: a maximal spin would just have caught it
  CHECK(w.window() == 800us);
  w.woke_after(10us);
  CHECK(w.window() == 1000us);
  w.woke_after(10us);
  CHECK(w.window() == 1000us);  // never beyond
}

TEST_CASE("spin_window: a sleep longer than the maximum (a quiet connection) resets it", "[spin]") {
  spin_window w(100us, 1000us);
  for (int i = 0; i < 5; ++i) w.woke_after(10us);
  REQUIRE(w.window() == 1000us);
  w.woke_after(1001us);
  CHECK(w.window() == 100us);
  // Heartbeats every few hundred ms keep an idle connection at the base.
  for (int i = 0; i < 10; ++i) {
    w.woke_after(300ms);
    CHECK(w.window() == 100us);
  }
}

TEST_CASE("spin_window: a maximum at or below the base is a fixed spin", "[spin]") {
  spin_window fixed(100us, 100us);
  fixed.woke_after(1us);
  CHECK(fixed.window() == 100us);
  spin_window below(100us, 10us);
  below.woke_after(1us);
  CHECK(below.window() == 100us);
  below.woke_after(1s);
  CHECK(below.window() == 100us);
}

TEST_CASE("spin_window: a zero base still learns under load", "[spin]") {
  spin_window w(0us, 64us);
  CHECK(w.window() == 0us);
  w.woke_after(5us);
  CHECK(w.window() == 1us);
  for (int i = 0; i < 10; ++i) w.woke_after(5us);
  CHECK(w.window() == 64us);
  w.woke_after(1ms);
  CHECK(w.window() == 0us);
}
