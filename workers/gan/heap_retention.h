// RetainFreedHeapMemory: keeps the memory of large freed tensors in the process's heap for reuse,
// in the programs that train with LibTorch (the worker, the GAN benchmarks).
#ifndef GANTRY_WORKERS_GAN_HEAP_RETENTION_H_
#define GANTRY_WORKERS_GAN_HEAP_RETENTION_H_

namespace gantry::gan {

// Call early in main(). Makes glibc's malloc serve every allocation from its heap instead of
// separate mmap regions and never give the heap's free top back to the kernel, so a training
// step's large activations reuse pages the previous step faulted in. Leaves each setting alone
// when the environment sets it (MALLOC_MMAP_MAX_, MALLOC_TRIM_THRESHOLD_). The process keeps its
// heap at its high-water mark. Returns false when malloc refused a setting.
bool RetainFreedHeapMemory();

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_HEAP_RETENTION_H_
