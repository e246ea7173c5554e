#pragma once
// rdmarpc::bench::progress: progress of a benchmark point on stderr. On a terminal one status line
// is redrawn a few times a second; elsewhere (logs, the VM console) one line per finished point.
// Layer: bench. Threading: use from the thread that drives the closed_loop.

#include <string>

#include "bench/common/bench_result.hpp"
#include "bench/common/closed_loop.hpp"

namespace rdmarpc::bench {

class progress {
 public:
  explicit progress(bool enabled);

  void begin(std::string label, closed_loop::clock::time_point now);
  // Cheap when called on every completion: it redraws at most every 200 ms.
  void tick(const closed_loop& loop, closed_loop::clock::time_point now);
  void end(const bench_result& r);
  // A one-off message (errors, phases), on its own line.
  void note(const std::string& text);

 private:
  bool enabled_;
  bool tty_;
  bool line_open_ = false;
  std::string label_;
  closed_loop::clock::time_point begin_{};
  closed_loop::clock::time_point next_draw_{};
};

}  // namespace rdmarpc::bench
