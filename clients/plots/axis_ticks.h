// AxisTicks: tick positions and labels of one plot axis ("nice numbers" on linear axes, decades on
// logarithmic ones). Pure functions, thread-safe.
#ifndef GANTRY_CLIENTS_PLOTS_AXIS_TICKS_H_
#define GANTRY_CLIENTS_PLOTS_AXIS_TICKS_H_

#include <string>
#include <vector>

namespace gantry::plots {

// One tick: its value and the label drawn next to it. On a log axis `exponent` is set and the label
// is drawn as 10^exponent (`label` holds the plain text "1e3" for tests and SVG titles).
struct Tick {
  double value = 0;
  std::string label;
  bool has_exponent = false;
  int exponent = 0;
};

// An axis range (lo < hi) with its major ticks, all inside [lo, hi].
struct AxisTicks {
  double lo = 0;
  double hi = 1;
  std::vector<Tick> ticks;
};

// A linear axis covering [lo, hi] with about `target` ticks at multiples of 1, 2 or 5 x 10^k. The
// range is widened outward to the enclosing tick multiples when `expand` is set. A degenerate or
// non-finite range becomes a small range around its value (or [0, 1]).
AxisTicks LinearTicks(double lo, double hi, int target, bool expand);

// A logarithmic axis covering [lo, hi] (lo > 0; anything else becomes [1e-3, 1]), widened to whole
// decades, with a tick per decade (every n-th decade when there are more than 8).
AxisTicks LogTicks(double lo, double hi);

// The label of `value` on a linear axis whose ticks are `step` apart: as many decimals as the step
// needs, scientific notation for very large or very small magnitudes.
std::string FormatTick(double value, double step);

}  // namespace gantry::plots

#endif  // GANTRY_CLIENTS_PLOTS_AXIS_TICKS_H_
