// BenchFlag reads `--name=value` from a benchmark's command line (benchmarks keep their mains
// tiny).
#ifndef GANTRY_TESTS_BENCH_BENCH_FLAGS_H_
#define GANTRY_TESTS_BENCH_BENCH_FLAGS_H_

#include <cstring>
#include <string>

namespace gantry::bench {

// The value of --name=..., or `def` when the flag is absent.
inline std::string BenchFlag(int argc, char** argv, const std::string& name,
                             const std::string& def) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return def;
}

}  // namespace gantry::bench

#endif  // GANTRY_TESTS_BENCH_BENCH_FLAGS_H_
