// ChunkGuard: what gantry checks of each chunk of a chunked dataset before libhdf5 reads it.
//
// Why: libhdf5 1.10.8 (Debian 12) allocates the buffer of a chunk it reads by the chunk's stored
// size, runs the filters, and then copies a whole chunk out of that buffer without checking that
// the filters' output filled it (H5D__chunk_lock). A chunk whose filter mask skips its filters, an
// unfiltered chunk stored short, or a deflate stream that ends early is copied past the end of
// that buffer (a heap overread, found by hdf5_inspect_fuzzer). So every chunk is checked once,
// before the first read that touches it: stored at all, every filter applied, and (with deflate)
// inflated here, into no buffer, to exactly the chunk's size.
#ifndef GANTRY_SHOWERS_CHUNK_GUARD_H_
#define GANTRY_SHOWERS_CHUNK_GUARD_H_

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gantry::showers::h5 {

class ChunkGuard {
 public:
  // For a chunked dataset (`quoted` names it in messages) of `dims`, stored in chunks of `chunk`
  // of `chunk_bytes` uncompressed bytes each: checks its filter pipeline (shuffle, deflate and
  // fletcher32 only, in that order, each at most once; no unfiltered edge chunks) and returns the
  // guard of its chunks. INVALID_ARGUMENT names what is not accepted. Call under LibraryLock.
  static absl::StatusOr<std::shared_ptr<ChunkGuard>> Create(const std::string& path,
                                                            const std::string& quoted, hid_t dcpl,
                                                            std::vector<hsize_t> dims,
                                                            std::vector<hsize_t> chunk,
                                                            uint64_t chunk_bytes);

  // Checks every chunk holding rows [first, first + count) of `dataset` that no earlier call
  // checked. The first bad chunk is named: INVALID_ARGUMENT when the file says it is stored in a
  // way gantry does not read, DATA_LOSS when its deflate stream is damaged. Call under LibraryLock.
  absl::Status CheckRows(const std::string& path, hid_t dataset, int64_t first, int64_t count);

 private:
  ChunkGuard() = default;
  absl::Status CheckChunk(const std::string& path, hid_t dataset,
                          const std::vector<hsize_t>& offset);

  std::string quoted_;
  std::vector<hsize_t> dims_, chunk_, along_;  // along_: chunks along each axis
  uint64_t chunk_bytes_ = 0;
  bool filtered_ = false, deflate_ = false, fletcher32_ = false;
  std::mutex mu_;              // readers of one file may call CheckRows from several threads
  std::vector<bool> checked_;  // by chunk index, row-major over along_; guarded by mu_
};

}  // namespace gantry::showers::h5

#endif  // GANTRY_SHOWERS_CHUNK_GUARD_H_
