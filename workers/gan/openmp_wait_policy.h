// PreferPassiveOpenMpWait: makes GNU OpenMP's idle threads sleep instead of spin in the programs
// that run LibTorch (the worker, the GAN benchmarks), unless the environment chooses otherwise.
#ifndef GANTRY_WORKERS_GAN_OPENMP_WAIT_POLICY_H_
#define GANTRY_WORKERS_GAN_OPENMP_WAIT_POLICY_H_

namespace gantry::gan {

// Call first thing in main(). When OMP_WAIT_POLICY is unset, sets it to PASSIVE and re-executes the
// program (same pid, same arguments), because libgomp reads its environment once, in its own
// initializer before main(). Returns when the variable was already set (by the user or by the
// re-execution) or when the re-execution failed (the program then runs with libgomp's default).
void PreferPassiveOpenMpWait(char** argv);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_OPENMP_WAIT_POLICY_H_
