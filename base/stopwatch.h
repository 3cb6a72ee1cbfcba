// SecondsSince: wall time elapsed since a steady_clock instant, in seconds (log lines, progress
// reports and benchmarks; never a test's pass criterion).
#ifndef GANTRY_BASE_STOPWATCH_H_
#define GANTRY_BASE_STOPWATCH_H_

#include <chrono>

namespace gantry {

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace gantry

#endif  // GANTRY_BASE_STOPWATCH_H_
