// DatasetCache: the worker's content-addressed dataset cache under <cache-dir>/datasets, shared by
// every rank and job on the worker (separate processes) and by the daemon that reports it.
//
// Layout, one entry per key (a lowercase sha256 hex):
//   <key>.h5       the data file; present only once complete and verified
//   <key>.meta     key, sha256 of the file bytes, size, source reference, creation and last-use
//                  times, attributes (text "name value" lines)
//   <key>.h5.part  a fill in progress or interrupted (never listed, never counted)
//   <key>.lock     flock'd (LOCK_EX) while one process checks or fills the entry
// An entry is complete only after: fill into the .part, fsync, verify, meta written, rename.
//
// Pinning: an acquisition returns a Lease holding a shared flock on the data file. Eviction takes
// the key's lock file and LOCK_EX|LOCK_NB on the data file and skips what it cannot lock, so an
// entry in use by any process is never evicted; a killed process releases its pins with its fds.
//
// Cost of an acquisition of a cached entry: the full sha256 of the file is recomputed (a
// corrupted byte is detected even when the size is unchanged), i.e. one sequential read of the
// file. Measured once on the build machine (2 shared cores, Debian 12): a 512 MiB file in the page
// cache hashes in 1.07 s (~500 MB/s; OpenSSL's sha256 alone: 1.75 GB/s by `openssl speed -evp
// sha256`), so a 2 GB 3DGAN file adds ~4 s to a rank's start: small against training, and the
// price of never training on silently corrupted data. List()/Summary() only read the small .meta
// files and stat the data files.
//
// Thread-safe: all coordination is through the file system (flock), so any number of instances
// in any number of processes may share one directory.
#ifndef GANTRY_WORKERS_RUNNER_DATASET_CACHE_H_
#define GANTRY_WORKERS_RUNNER_DATASET_CACHE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gantry::runner {

// One complete entry as recorded in its .meta file.
struct DatasetCacheEntry {
  std::string key;
  std::string sha256;  // of the data file's bytes (== key for ds- and file:// entries)
  int64_t size_bytes = 0;
  std::string source;  // the dataset reference it was filled from
  absl::Time created;
  absl::Time last_used;                           // updated by every acquisition; the LRU order
  std::map<std::string, std::string> attributes;  // set by the filler (e.g. energy ranges)
  std::string path;                               // <dir>/<key>.h5
};

// What the daemon reports in heartbeats.
struct DatasetCacheSummary {
  std::vector<std::string> keys;  // complete entries, sorted
  int64_t bytes = 0;              // their data files' sizes
};

// What every DatasetCache of this process did so far (monotonic totals; thread-safe to read).
// A rank sends the increments to its daemon for the daemon's /metrics page.
struct DatasetCacheCounters {
  int64_t hits = 0;    // Acquire/AcquireCached answered by a complete, verified entry
  int64_t misses = 0;  // Acquire that had to fill the entry
  int64_t filled_bytes = 0;
  int64_t evictions = 0;
  int64_t evicted_bytes = 0;
};
DatasetCacheCounters ProcessDatasetCacheCounters();

struct DatasetCacheOptions {
  // Entries live in <cache_dir>/datasets (created when missing).
  std::string cache_dir;
  // Evict least-recently-used entries after each fill while the total exceeds this; 0 = no limit.
  int64_t max_bytes = 0;
  // Receives one line per eviction and per over-the-limit warning; default: stderr.
  std::function<void(const std::string&)> log;
};

// How to fill a missing (or corrupted) entry.
struct DatasetFill {
  std::string source;  // recorded in the metadata
  // When true the filled bytes must hash to the key (DATA_LOSS otherwise, the .part is removed).
  bool key_is_content_sha256 = true;
  // Writes the entry's bytes into `part_path`. It may find the bytes of an interrupted earlier
  // fill there and resume after them (a ds- download does); otherwise it must truncate. Returns the
  // attributes to record (may be empty). Called with the key's fill lock held.
  std::function<absl::StatusOr<std::map<std::string, std::string>>(const std::string& part_path)>
      fill;
};

class DatasetCache {
 public:
  // A pin on one complete, verified entry: while a Lease lives (in any process) the entry is not
  // evicted. Movable; releasing (destruction) drops the shared flock.
  class Lease {
   public:
    Lease() = default;
    ~Lease();
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

    const DatasetCacheEntry& entry() const { return entry_; }
    const std::string& path() const { return entry_.path; }
    // True when this acquisition filled (or re-filled) the entry, false when it was reused.
    bool filled() const { return filled_; }
    bool valid() const { return fd_ >= 0; }

   private:
    friend class DatasetCache;
    int fd_ = -1;  // the data file, LOCK_SH
    DatasetCacheEntry entry_;
    bool filled_ = false;
  };

  // INVALID_ARGUMENT without a cache_dir; UNAVAILABLE when <cache_dir>/datasets cannot be created.
  static absl::StatusOr<std::unique_ptr<DatasetCache>> Create(DatasetCacheOptions options);

  // Returns a pinned, verified entry for `key` (a sha256 hex; INVALID_ARGUMENT otherwise). Waits
  // while another process fills the same key, then reuses its entry. A cached entry is re-verified
  // (size and full sha256 against its metadata); a corrupted one is removed and filled again. A
  // missing one is filled through `fill`, verified, fsync'd and renamed into place; then the cache
  // evicts down to max_bytes (never the new entry nor any pinned one). Errors of the filler are
  // returned as they are.
  absl::StatusOr<Lease> Acquire(const std::string& key, const DatasetFill& fill);

  // Like Acquire for an entry that must already be complete: NOT_FOUND when it is missing,
  // DATA_LOSS (and the entry is removed) when it fails verification.
  absl::StatusOr<Lease> AcquireCached(const std::string& key);

  // Complete entries (not .part files), least recently used first. Reads metadata only.
  std::vector<DatasetCacheEntry> List() const;
  DatasetCacheSummary Summary() const;

  // Evicts least-recently-used unpinned entries while the total exceeds max_bytes (no-op when
  // max_bytes is 0); returns the evicted keys. When only pinned entries remain over the limit it
  // says so in a log line.
  std::vector<std::string> EvictToLimit();

  // <dir>/<key>.h5 and the directory itself.
  std::string DataPath(const std::string& key) const;
  const std::string& dir() const { return dir_; }
  int64_t max_bytes() const { return options_.max_bytes; }

 private:
  explicit DatasetCache(DatasetCacheOptions options, std::string dir);

  absl::StatusOr<Lease> AcquireImpl(const std::string& key, const DatasetFill* fill);
  // With the key's lock held: opens, pins and verifies the complete entry; NOT_FOUND when
  // missing, DATA_LOSS when corrupted (the caller removes it).
  absl::StatusOr<Lease> PinAndVerify(const std::string& key);
  // With the key's lock held: fills, verifies and publishes the entry.
  absl::Status FillEntry(const std::string& key, const DatasetFill& fill);
  void RemoveEntryFiles(const std::string& key);
  void Log(const std::string& line) const;

  std::string MetaPath(const std::string& key) const;
  std::string PartPath(const std::string& key) const;
  std::string LockPath(const std::string& key) const;

  const DatasetCacheOptions options_;
  const std::string dir_;  // <cache_dir>/datasets
};

// True for 64 lowercase hex digits.
bool IsSha256Hex(const std::string& s);

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_DATASET_CACHE_H_
