// Analytic test objectives for the study search algorithms (shared by the tests and
// tests/bench/study_search_bench.cc): Branin, Hartmann-3 and a noisy mixed-kind quadratic, each
// with its search space and known minimum.
#ifndef GANTRY_TESTS_STUDIES_ANALYTIC_OBJECTIVES_H_
#define GANTRY_TESTS_STUDIES_ANALYTIC_OBJECTIVES_H_

#include <cmath>
#include <functional>
#include <string>

#include "studies/random_source.h"
#include "studies/search_space.h"

namespace gantry::studies::testing {

struct AnalyticObjective {
  std::string name;
  SearchSpace space;
  // The noise-free value at an assignment.
  std::function<double(const Assignment&)> value;
  double minimum = 0;
  // Standard deviation of the Gaussian noise added to each observation (0: exact).
  double noise = 0;
};

inline double Number(const Assignment& a, const std::string& name) {
  const ParameterValue& v = a.at(name);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

// Branin-Hoo on [-5, 10] x [0, 15]: three global minima of 0.397887.
inline AnalyticObjective Branin() {
  return {"branin",
          SearchSpace({{"x1", ParameterKind::kContinuous, -5, 10, {}},
                       {"x2", ParameterKind::kContinuous, 0, 15, {}}}),
          [](const Assignment& a) {
            const double x1 = Number(a, "x1"), x2 = Number(a, "x2");
            const double b = 5.1 / (4 * M_PI * M_PI), c = 5 / M_PI, t = 1 / (8 * M_PI);
            const double u = x2 - b * x1 * x1 + c * x1 - 6;
            return u * u + 10 * (1 - t) * std::cos(x1) + 10;
          },
          0.397887, 0};
}

// Hartmann-3 on [0, 1]^3: minimum -3.86278 at (0.114614, 0.555649, 0.852547).
inline AnalyticObjective Hartmann3() {
  return {"hartmann3",
          SearchSpace({{"x1", ParameterKind::kContinuous, 0, 1, {}},
                       {"x2", ParameterKind::kContinuous, 0, 1, {}},
                       {"x3", ParameterKind::kContinuous, 0, 1, {}}}),
          [](const Assignment& a) {
            static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
            static const double A[4][3] = {{3, 10, 30}, {0.1, 10, 35}, {3, 10, 30}, {0.1, 10, 35}};
            static const double P[4][3] = {{0.3689, 0.1170, 0.2673},
                                           {0.4699, 0.4387, 0.7470},
                                           {0.1091, 0.8732, 0.5547},
                                           {0.0381, 0.5743, 0.8828}};
            const double x[3] = {Number(a, "x1"), Number(a, "x2"), Number(a, "x3")};
            double sum = 0;
            for (int i = 0; i < 4; ++i) {
              double inner = 0;
              for (int j = 0; j < 3; ++j) inner += A[i][j] * (x[j] - P[i][j]) * (x[j] - P[i][j]);
              sum += alpha[i] * std::exp(-inner);
            }
            return -sum;
          },
          -3.86278, 0};
}

// A training-like objective over a continuous, a log-scale and an integer parameter and a
// categorical one: a quadratic bowl in (x, log10(lr) + 2.5, (layers - 4) / 4) with minimum 0 at
// x = 0.3, lr = 10^-2.5, layers = 4, optimizer = "adam" (the other choices add 0.5), observed
// with Gaussian noise of standard deviation 0.05.
inline AnalyticObjective NoisyQuadratic() {
  return {
      "noisy_quadratic",
      SearchSpace({{"x", ParameterKind::kContinuous, -1, 1, {}},
                   {"lr", ParameterKind::kLogContinuous, 1e-5, 1e-1, {}},
                   {"layers", ParameterKind::kInteger, 1, 8, {}},
                   {"optimizer", ParameterKind::kCategorical, 0, 0, {"sgd", "adam", "rmsprop"}}}),
      [](const Assignment& a) {
        const double x = Number(a, "x") - 0.3;
        const double lr = std::log10(Number(a, "lr")) + 2.5;
        const double layers = (Number(a, "layers") - 4) / 4;
        const double penalty = std::get<std::string>(a.at("optimizer")) == "adam" ? 0 : 0.5;
        return x * x + 0.25 * lr * lr + layers * layers + penalty;
      },
      0.0, 0.05};
}

}  // namespace gantry::studies::testing

#endif  // GANTRY_TESTS_STUDIES_ANALYTIC_OBJECTIVES_H_
