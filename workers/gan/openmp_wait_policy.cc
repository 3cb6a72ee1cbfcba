#include "workers/gan/openmp_wait_policy.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>

namespace gantry::gan {

// Why: libgomp's default lets a thread that reaches a barrier spin for ~300,000 iterations before
// it sleeps. LibTorch runs thousands of parallel regions per training step; on a 2-core machine
// shared with other work the spinning thread holds a core that its partner needs (more than half
// of a step's CPU samples were in libgomp's spin loop), and steps took up to 3x longer. On an idle
// machine sleeping costs a futex wake per region, within the noise of a step
// (docs/studies/2026-11-28-gan-speed-libtorch-vs-pytorch.md).
//
// Setting the variable from inside the process is too late: libgomp has read the environment in its
// initializer, and even an executable's .preinit_array does not help (glibc's own initializer,
// which runs after it, resets environ to the original block). Hence the re-execution.
void PreferPassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  // The binary's own path, not /proc/self/exe: exec names the process after the file it runs, and
  // "exe" would break whatever finds the worker by name (the container health check reads
  // /proc/1/comm).
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return;
  path[n] = '\0';
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1) != 0) return;
  execv(path, argv);
  // Only reached when exec failed: run on, with libgomp's default, and keep the variable unset
  // so child processes see the same environment as this one.
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace gantry::gan
