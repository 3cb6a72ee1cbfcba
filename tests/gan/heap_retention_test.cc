// RetainFreedHeapMemory: a large block freed and allocated again reuses the pages already faulted
// in, instead of a fresh mmap whose every page faults (and is zeroed by the kernel) on first touch.
#include "workers/gan/heap_retention.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <thread>

namespace gantry::gan {
namespace {

constexpr size_t kBlock = size_t{256} << 20;  // larger than glibc's largest mmap threshold
constexpr long kPages = static_cast<long>(kBlock / 4096);

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Allocates, writes every page and frees a block; returns the page faults that took. Called
// through a volatile pointer so the compiler cannot drop the allocation.
long FaultsOfTouchedBlock() {
  static void* (*volatile allocate)(size_t) = std::malloc;
  const long before = MinorFaults();
  auto* block = static_cast<volatile char*>(allocate(kBlock));
  if (block == nullptr) return -1;
  for (size_t i = 0; i < kBlock; i += 4096) block[i] = static_cast<char>(i);
  const long faults = MinorFaults() - before;
  std::free(const_cast<char*>(block));
  return faults;
}

TEST(HeapRetentionTest, FreedLargeBlockIsReusedWithoutPageFaults) {
  // Without the setting, glibc maps and unmaps the block: every allocation faults all its pages.
  const long unretained = FaultsOfTouchedBlock();
  EXPECT_GT(unretained, kPages / 2);
  EXPECT_GT(FaultsOfTouchedBlock(), kPages / 2);

  ASSERT_TRUE(RetainFreedHeapMemory());
  const long first = FaultsOfTouchedBlock();  // grows the heap: faults once
  EXPECT_GT(first, kPages / 2);
  const long second = FaultsOfTouchedBlock();  // the same pages again
  EXPECT_LT(second, kPages / 50) << "first touch " << first << " faults, second " << second;
}

// With mmap off, a thread whose malloc arena is not the main one (its heaps are at most 64 MiB)
// still gets a large block: glibc retries in the main arena. The worker's gRPC threads generate.
TEST(HeapRetentionTest, OtherThreadsStillGetLargeBlocks) {
  ASSERT_TRUE(RetainFreedHeapMemory());
  long faults = -1;
  std::thread worker([&faults] {
    void* small = std::malloc(64);  // binds this thread to an arena first
    faults = FaultsOfTouchedBlock();
    std::free(small);
  });
  worker.join();
  EXPECT_GE(faults, 0) << "malloc of " << kBlock << " bytes failed on another thread";
}

}  // namespace
}  // namespace gantry::gan
