#include "workers/gan/openmp_wait_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace gantry::gan {

// Why: libgomp's default lets a thread that reaches a barrier spin for ~300,000 iterations before
// it sleeps. LibTorch runs thousands of parallel regions per training step; on a 2-core machine
// shared with other work the spinning thread holds a core that its partner needs (more than half
// of a step's CPU samples were in libgomp's spin loop), and steps took up to 3x longer. On an idle
// machine sleeping costs a futex wake per region, within the noise of a step (docs/BENCHMARKS.md).
//
// Setting the variable from inside the process is too late: libgomp has read the environment in its
// initializer, and even an executable's .preinit_array does not help (glibc's own initializer,
// which runs after it, resets environ to the original block). Hence the re-execution.
void PreferPassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when exec failed: run on, with libgomp's default, and keep the variable unset
  // so child processes see the same environment as this one.
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace gantry::gan
