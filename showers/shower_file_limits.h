// ShowerFileLimits: the bounds every size read from a shower file must keep before anything is
// allocated or read for it (events, cells, bytes, chunks), so a small hostile file cannot ask for
// terabytes of memory or hours of reading.
#ifndef GANTRY_SHOWERS_SHOWER_FILE_LIMITS_H_
#define GANTRY_SHOWERS_SHOWER_FILE_LIMITS_H_

#include <cstdint>

namespace gantry::showers {

// Plain values; the defaults fit every real 3DGAN and CaloChallenge file. Checked, with overflow
// checks, when a file is opened: a file outside them is INVALID_ARGUMENT naming the bound.
struct ShowerFileLimits {
  int64_t max_events = 50'000'000;      // events of one file
  int64_t max_cells_per_event = 65025;  // 51x51x25, the largest layout
  // Uncompressed bytes of one dataset (events x cells x element size).
  int64_t max_dataset_bytes = int64_t{1} << 40;
  int64_t max_chunks = int64_t{1} << 24;         // chunks of one chunked dataset
  int64_t max_chunk_bytes = int64_t{256} << 20;  // one uncompressed chunk (HDF5 buffers it)
  int64_t max_per_event_columns = 64;            // width of (N,k) per-event datasets
  // Uncompressed / stored bytes of a filtered dataset; deflate cannot exceed ~1032.
  int64_t max_compression_ratio = 1100;
};

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_SHOWER_FILE_LIMITS_H_
