#include "clients/plots/axis_ticks.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gantry::plots {
namespace {

// The nice number (1, 2, 5 or 10 x 10^k) closest above `raw`.
double NiceStep(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / power;
  double nice = 10;
  if (fraction <= 1.0) {
    nice = 1;
  } else if (fraction <= 2.0) {
    nice = 2;
  } else if (fraction <= 5.0) {
    nice = 5;
  }
  return nice * power;
}

}  // namespace

std::string FormatTick(double value, double step) {
  if (std::fabs(value) < step * 1e-6) value = 0;  // -0 and rounding noise print as 0
  const double magnitude = std::max(std::fabs(value), step);
  if (magnitude >= 1e5 || (magnitude < 1e-3 && magnitude > 0)) {
    return absl::StrFormat("%.3g", value);
  }
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 6);
  return absl::StrFormat("%.*f", decimals, value);
}

AxisTicks LinearTicks(double lo, double hi, int target, bool expand) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    lo = 0;
    hi = 1;
  }
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo <= std::max(std::fabs(lo), std::fabs(hi)) * 1e-12) {
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  target = std::clamp(target, 2, 20);
  const double step = NiceStep((hi - lo) / target);
  AxisTicks axis;
  if (expand) {
    axis.lo = std::floor(lo / step + 1e-9) * step;
    axis.hi = std::ceil(hi / step - 1e-9) * step;
  } else {
    axis.lo = lo;
    axis.hi = hi;
  }
  const double first = std::ceil(axis.lo / step - 1e-9);
  for (double k = first;; k += 1) {
    const double v = k * step;
    if (v > axis.hi + step * 1e-9 || axis.ticks.size() > 50) break;
    axis.ticks.push_back({v, FormatTick(v, step)});
  }
  return axis;
}

AxisTicks LogTicks(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(lo) || !std::isfinite(hi)) {
    lo = 1e-3;
    hi = 1;
  }
  if (hi <= lo) hi = lo * 10;
  int first = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int last = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  first = std::clamp(first, -300, 300);
  last = std::clamp(last, first + 1, 300);
  AxisTicks axis;
  axis.lo = std::pow(10.0, first);
  axis.hi = std::pow(10.0, last);
  const int every = (last - first) / 8 + 1;
  for (int e = first; e <= last; ++e) {
    if ((e - first) % every != 0) continue;
    Tick tick;
    tick.value = std::pow(10.0, e);
    tick.label = absl::StrCat("1e", e);
    tick.has_exponent = true;
    tick.exponent = e;
    axis.ticks.push_back(tick);
  }
  return axis;
}

}  // namespace gantry::plots
