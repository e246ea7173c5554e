// Unit tests of the adaptive polling mode's spin window (transport/rdma/spin_window.hpp): how long
// cq_reactor polls after a completion, learnt from the gaps between completions it slept through.
#include "transport/rdma/spin_window.hpp"

#include <catch2/catch.hpp>
#include <chrono>

using rdmarpc::transport::rdma::spin_window;
using namespace std::chrono_literals;

TEST_CASE("spin_window: starts at the base spin", "[spin]") {
  const spin_window w(100us, 1000us);
  CHECK(w.window() == 100us);
}

TEST_CASE("spin_window: gaps a longer spin would have bridged grow it, up to the maximum", "[spin]") {
  spin_window w(100us, 1000us);
  w.after_gap(150us);  // a round trip a little longer than the spin
  CHECK(w.window() == 200us);
  w.after_gap(700us);
  CHECK(w.window() == 400us);
  w.after_gap(1000us);  // exactly the maximum: a maximal spin would just have caught it
  CHECK(w.window() == 800us);
  w.after_gap(900us);
  CHECK(w.window() == 1000us);
  w.after_gap(900us);
  CHECK(w.window() == 1000us);  // never beyond
}

TEST_CASE("spin_window: a gap longer than the maximum resets it: no spin would have bridged it", "[spin]") {
  spin_window w(100us, 1000us);
  for (int i = 0; i < 5; ++i) w.after_gap(500us);
  REQUIRE(w.window() == 1000us);
  w.after_gap(1001us);
  CHECK(w.window() == 100us);
  // Completions 1.5 ms apart never grow it: spinning 1 ms and then sleeping anyway would only
  // burn the CPU.
  for (int i = 0; i < 10; ++i) {
    w.after_gap(1500us);
    CHECK(w.window() == 100us);
  }
  // Heartbeats every few hundred ms keep an idle connection at the base.
  w.after_gap(300ms);
  CHECK(w.window() == 100us);
}

TEST_CASE("spin_window: a maximum at or below the base is a fixed spin", "[spin]") {
  spin_window fixed(100us, 100us);
  fixed.after_gap(50us);
  CHECK(fixed.window() == 100us);
  spin_window below(100us, 10us);
  below.after_gap(50us);
  CHECK(below.window() == 100us);
  below.after_gap(1s);
  CHECK(below.window() == 100us);
}

TEST_CASE("spin_window: a zero base still learns under load", "[spin]") {
  spin_window w(0us, 64us);
  CHECK(w.window() == 0us);
  w.after_gap(5us);
  CHECK(w.window() == 1us);
  for (int i = 0; i < 10; ++i) w.after_gap(5us);
  CHECK(w.window() == 64us);
  w.after_gap(1ms);
  CHECK(w.window() == 0us);
}

TEST_CASE("spin_window: settings beyond a second or below zero are clamped", "[spin]") {
  spin_window huge(std::chrono::microseconds::max(), std::chrono::microseconds::max());
  CHECK(huge.window() == spin_window::kLongest);
  huge.after_gap(1ms);
  CHECK(huge.window() == spin_window::kLongest);  // no overflow doubling it
  spin_window negative(-5us, -1us);
  CHECK(negative.window() == 0us);
  negative.after_gap(1us);
  CHECK(negative.window() == 0us);  // max clamped to base: fixed
}
