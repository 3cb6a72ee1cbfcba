// main() of the test programs that run LibTorch in their own process: the process settings
// gantry-worker makes before anything else (workers/app/main.cc), then every test. Without them a
// test trains under glibc's and libgomp's defaults, which the worker never runs with: large tensors
// mapped and unmapped on every allocation (a third of gpu_check's time was page faults) and OpenMP
// threads spinning at barriers on a machine that ctest shares between two tests.
#include <gtest/gtest.h>

#include "workers/gan/heap_retention.h"
#include "workers/gan/openmp_wait_policy.h"

int main(int argc, char** argv) {
  gantry::gan::PreferPassiveOpenMpWait(argv);  // may re-execute this program
  gantry::gan::RetainFreedHeapMemory();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
