// FUZZ_CHECK: aborts the fuzz target with a message when an invariant of the code under test does
// not hold, so libFuzzer records the input as a crash (like a sanitizer report).
#ifndef GANTRY_TESTS_FUZZ_FUZZ_CHECK_H_
#define GANTRY_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, what)                                                                 \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   what);                                                                      \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

#endif  // GANTRY_TESTS_FUZZ_FUZZ_CHECK_H_
