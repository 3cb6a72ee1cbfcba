// libFuzzer target: HDF5 shower files as the server inspects an upload (showers InspectShowerFile)
// and a worker reads one (ShowerFileReader, ReadShowerEvents). The input is written to a private
// temporary file (HDF5 reads files by name). Checks that what Inspect accepts, the reader opens and
// reads with the same event count and shape.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "showers/hdf5_io.h"
#include "showers/shower_file_reader.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// A file name private to this process (several fuzz jobs may run at once), removed at exit.
const std::string& ScratchPath() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string p = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") +
                    "/gantry-hdf5-fuzz-" + std::to_string(getpid()) + ".h5";
    std::atexit([] { std::remove(ScratchPath().c_str()); });
    return p;
  }();
  return path;
}

bool WriteScratch(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(ScratchPath().c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

// A small chunk cache: the inputs are a few KB, and a 64 MiB cache per open only costs time.
gantry::showers::ShowerFileReaderOptions ReaderOptions() {
  gantry::showers::ShowerFileReaderOptions options;
  options.chunk_cache_bytes = int64_t{1} << 20;
  return options;
}

}  // namespace

// libhdf5 (not instrumented, not gantry's) sizes some of its own buffers from the file and handles
// a failed malloc as an error: let a huge request return null as glibc does in production instead
// of aborting. An unbounded allocation in gantry code still fails: operator new throws bad_alloc,
// uncaught here. run_fuzzers.sh drops the malloc limit for this target for the same reason.
// max_allocation_size_mb: one allocation over 1 GiB fails, as in production, where the inspection
// runs under a 1 GiB address-space limit (--inspect-memory-mb); without it ASan poisons the shadow
// of the gigabytes a corrupt size asks for, seconds per input (fuzzing timeouts, not bugs).
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:soft_rss_limit_mb=3072:max_allocation_size_mb=1024";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!WriteScratch(data, size)) std::abort();
  const std::string& path = ScratchPath();

  absl::StatusOr<gantry::showers::DatasetInfo> info = gantry::showers::InspectShowerFile(path);
  absl::StatusOr<std::unique_ptr<gantry::showers::ShowerFileReader>> reader =
      gantry::showers::ShowerFileReader::Open(path, ReaderOptions());
  if (reader.ok()) {
    const int64_t events = (*reader)->events();
    std::vector<int64_t> indices;
    if (events > 0) indices = {0, events - 1, events / 2};
    (void)(*reader)->ReadEvents(indices);
    if (info.ok()) {
      FUZZ_CHECK(info->events == events, "inspection and reader agree on the event count");
      FUZZ_CHECK(info->shape == (*reader)->shape(), "inspection and reader agree on the shape");
    }
  }
  (void)gantry::showers::ReadShowerEvents(path, 0, 2);
  return 0;
}
