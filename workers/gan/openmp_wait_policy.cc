// Makes GNU OpenMP's idle threads sleep instead of spin (OMP_WAIT_POLICY=PASSIVE) in every binary
// that links this object, unless the environment already chooses a policy.
//
// Why: libgomp's default lets a thread that reaches a barrier spin for ~300,000 iterations before
// it sleeps. LibTorch runs thousands of parallel regions per training step; on a 2-core machine
// shared with other work the spinning thread holds a core that its partner needs, and a step took
// 3x longer (docs/BENCHMARKS.md, "3DGAN generation and training"). On an idle machine sleeping
// costs a futex wake per region, within the noise of a step.
//
// libgomp reads its environment in its own initializer, which runs before main() and before any
// static constructor of the executable; only the executable's .preinit_array runs earlier (ELF
// gABI: pre-initialization functions run before all other initializers), so the variable is set
// there. It is inherited by child processes (data-parallel ranks started by the worker).
#include <cstdlib>

namespace {

void PreferPassiveOpenMpWait(int /*argc*/, char** /*argv*/, char** /*envp*/) {
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
}

}  // namespace

__attribute__((section(".preinit_array"), used)) static void (*const kPreferPassiveOpenMpWait)(
    int, char**, char**) = &PreferPassiveOpenMpWait;
