// ChunkReader: gantry's own reader of a chunked dataset's chunks, in place of libhdf5's.
//
// Why: libhdf5 1.10.8 (Debian 12) allocates the buffer of a chunk it reads by the chunk's stored
// size, runs the filters, and then copies a whole chunk out of that buffer without checking that
// the filters' output filled it (H5D__chunk_lock). A chunk whose filter mask skips its filters, an
// unfiltered chunk stored short, or a deflate stream that ends early is copied past the end of
// that buffer (a heap overread, found by hdf5_inspect_fuzzer). So gantry decodes chunks itself:
// each chunk's raw bytes (H5Dread_chunk, checked in size against its chunk first), its Fletcher32
// checksum, its deflate stream inflated into exactly the chunk's bytes, the shuffle undone and the
// elements converted to float (H5Tconvert, the conversion H5Dread uses). A small cache of decoded
// chunks serves reads that share a chunk, so each chunk is inflated once where libhdf5 was
// checked and then read (twice).
#ifndef GANTRY_SHOWERS_CHUNK_READER_H_
#define GANTRY_SHOWERS_CHUNK_READER_H_

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "showers/hdf5_common.h"

namespace gantry::showers::h5 {

class ChunkReader {
 public:
  // For the chunked dataset `dataset` (`quoted` names it in messages) of `dims`, stored in chunks
  // of `chunk` of `chunk_bytes` uncompressed bytes each: checks its filter pipeline (shuffle of
  // its element size, deflate and fletcher32 only, in that order, each at most once; no unfiltered
  // edge chunks) and returns its reader, which keeps up to `cache_bytes` of decoded chunks (128
  // chunks at most). INVALID_ARGUMENT names what is not accepted. Call under LibraryLock.
  static absl::StatusOr<std::shared_ptr<ChunkReader>> Create(
      const std::string& path, const std::string& quoted, hid_t dataset, hid_t dcpl,
      std::vector<hsize_t> dims, std::vector<hsize_t> chunk, uint64_t chunk_bytes,
      int64_t cache_bytes);

  // Reads rows [first, first + count) of `dataset` (all trailing dimensions) as float into out.
  // The first bad chunk is named: INVALID_ARGUMENT when the file says it is stored in a way gantry
  // does not read, DATA_LOSS when its bytes are damaged (checksum, deflate stream). Thread-safe;
  // call under LibraryLock.
  absl::Status ReadRows(const std::string& path, hid_t dataset, int64_t first, int64_t count,
                        float* out);

 private:
  using Decoded = std::shared_ptr<const float[]>;  // one chunk's values, C order

  ChunkReader() = default;
  // The decoded chunk at chunk coordinates `at` (its index `index`), from the cache or decoded.
  absl::StatusOr<Decoded> Chunk(const std::string& path, hid_t dataset,
                                const std::vector<hsize_t>& at, uint64_t index);
  absl::StatusOr<Decoded> Decode(const std::string& path, hid_t dataset,
                                 const std::vector<hsize_t>& offset) const;
  // Copies the part of chunk `at` (decoded) that lies in rows [first, first + count) into out.
  void CopyOut(const std::vector<hsize_t>& at, const float* decoded, int64_t first, int64_t count,
               float* out) const;

  std::string quoted_;
  Handle type_;  // the dataset's element type in the file
  size_t element_bytes_ = 0;
  bool native_float_ = false;                  // stored as this machine's float: no conversion
  std::vector<hsize_t> dims_, chunk_, along_;  // along_: chunks along each axis
  uint64_t chunk_bytes_ = 0, chunk_elements_ = 0;
  bool shuffle_ = false, deflate_ = false, fletcher32_ = false;
  int64_t cache_bytes_ = 0;
  std::mutex mu_;  // guards cache_: readers of one file may read from several threads
  std::vector<std::pair<uint64_t, Decoded>> cache_;  // most recently used first
};

}  // namespace gantry::showers::h5

#endif  // GANTRY_SHOWERS_CHUNK_READER_H_
