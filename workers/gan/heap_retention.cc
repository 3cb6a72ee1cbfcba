#include "workers/gan/heap_retention.h"

#include <malloc.h>

#include <cstdlib>

namespace gantry::gan {

// Why: glibc serves allocations above its mmap threshold (at most 32 MiB) with a fresh mmap and
// unmaps them on free. A 3dgan-25 training step at batch 64 allocates and frees tensors of 32-128
// MB thousands of times, and every one of them page-faults its memory in again, zeroed by the
// kernel: 18% of the step's CPU time was in the kernel's page-fault path (perf, 2 threads, AVX2
// VM), and the step took 21% longer than with the memory kept
// (docs/studies/2026-11-28-gan-speed-libtorch-vs-pytorch.md).
bool RetainFreedHeapMemory() {
  bool ok = true;
  if (std::getenv("MALLOC_MMAP_MAX_") == nullptr) ok = mallopt(M_MMAP_MAX, 0) == 1 && ok;
  // -1: never trim the heap's top (mallopt(3)).
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) {
    ok = mallopt(M_TRIM_THRESHOLD, -1) == 1 && ok;
  }
  return ok;
}

}  // namespace gantry::gan
