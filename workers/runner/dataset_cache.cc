#include "workers/runner/dataset_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iostream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/atomic_file.h"
#include "base/log.h"
#include "base/sha256.h"
#include "base/status_macros.h"

namespace gantry::runner {
namespace {

std::string Errno(const std::string& what, const std::string& path) {
  return absl::StrCat(what, " ", path, ": ", std::strerror(errno));
}

// An open file descriptor closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

int FlockRetry(int fd, int op) {
  int rc;
  do {
    rc = ::flock(fd, op);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

// Opens (creating) the lock file `path` and flocks it with `op`. Retries when the file was
// unlinked (by an evictor holding it) between open and flock, so the returned lock is on the file
// that is at `path` now. With LOCK_NB and the lock busy: *busy = true and an invalid Fd.
absl::StatusOr<Fd> LockFile(const std::string& path, int op, bool* busy = nullptr) {
  if (busy != nullptr) *busy = false;
  for (;;) {
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (fd.get() < 0) return absl::UnavailableError(Errno("cannot open lock file", path));
    if (FlockRetry(fd.get(), op) != 0) {
      if (errno == EWOULDBLOCK && busy != nullptr) {
        *busy = true;
        return Fd();
      }
      return absl::UnavailableError(Errno("cannot lock", path));
    }
    struct stat held, now;
    if (::fstat(fd.get(), &held) != 0) return absl::UnavailableError(Errno("cannot stat", path));
    if (::stat(path.c_str(), &now) == 0 && now.st_ino == held.st_ino && now.st_dev == held.st_dev) {
      return fd;
    }
    // Unlinked meanwhile: lock the file that is there now.
  }
}

// sha256 of everything readable from `fd` (from offset 0) and the byte count.
absl::StatusOr<std::string> HashFd(int fd, const std::string& path, int64_t* size) {
  Sha256 hasher;
  std::string buffer(1 << 20, '\0');
  int64_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::DataLossError(Errno("read error in", path));
    }
    if (n == 0) break;
    hasher.Update(absl::string_view(buffer.data(), static_cast<size_t>(n)));
    offset += n;
  }
  *size = offset;
  return hasher.HexDigest();
}

absl::Status FsyncPath(const std::string& path, bool directory) {
  Fd fd(::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC));
  if (fd.get() < 0) return absl::UnavailableError(Errno("cannot open", path));
  if (::fsync(fd.get()) != 0) return absl::UnavailableError(Errno("cannot fsync", path));
  return absl::OkStatus();
}

std::string OneLine(const std::string& s) {
  return absl::StrReplaceAll(s, {{"\n", " "}, {"\r", " "}});
}

std::string FormatMeta(const DatasetCacheEntry& e) {
  std::string out =
      absl::StrCat("key ", e.key, "\nsha256 ", e.sha256, "\nsize_bytes ", e.size_bytes, "\nsource ",
                   OneLine(e.source), "\ncreated_us ", absl::ToUnixMicros(e.created),
                   "\nlast_used_us ", absl::ToUnixMicros(e.last_used), "\n");
  for (const auto& [name, value] : e.attributes) {
    absl::StrAppend(&out, "attr.", OneLine(name), " ", OneLine(value), "\n");
  }
  return out;
}

// NOT_FOUND when the file is missing, DATA_LOSS when it does not parse.
absl::StatusOr<DatasetCacheEntry> ReadMeta(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " is missing"));
    return absl::UnavailableError(Errno("cannot open", path));
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(Errno("cannot read", path));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  DatasetCacheEntry e;
  int64_t created = 0, last_used = 0;
  bool have_size = false;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const size_t space = line.find(' ');
    const absl::string_view name = line.substr(0, space);
    const std::string value(space == absl::string_view::npos ? "" : line.substr(space + 1));
    if (name == "key") {
      e.key = value;
    } else if (name == "sha256") {
      e.sha256 = value;
    } else if (name == "size_bytes") {
      have_size = absl::SimpleAtoi(value, &e.size_bytes);
    } else if (name == "source") {
      e.source = value;
    } else if (name == "created_us") {
      absl::SimpleAtoi(value, &created);
    } else if (name == "last_used_us") {
      absl::SimpleAtoi(value, &last_used);
    } else if (absl::StartsWith(name, "attr.")) {
      e.attributes[std::string(name.substr(5))] = value;
    }
  }
  if (!IsSha256Hex(e.key) || !IsSha256Hex(e.sha256) || !have_size || e.size_bytes < 0) {
    return absl::DataLossError(absl::StrCat(path, ": unreadable cache metadata"));
  }
  e.created = absl::FromUnixMicros(created);
  e.last_used = absl::FromUnixMicros(last_used);
  return e;
}

}  // namespace

bool IsSha256Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// ---- Lease ----

DatasetCache::Lease::~Lease() {
  if (fd_ >= 0) ::close(fd_);
}

DatasetCache::Lease::Lease(Lease&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), entry_(std::move(other.entry_)), filled_(other.filled_) {}

DatasetCache::Lease& DatasetCache::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    entry_ = std::move(other.entry_);
    filled_ = other.filled_;
  }
  return *this;
}

// ---- DatasetCache ----

DatasetCache::DatasetCache(DatasetCacheOptions options, std::string dir)
    : options_(std::move(options)), dir_(std::move(dir)) {}

absl::StatusOr<std::unique_ptr<DatasetCache>> DatasetCache::Create(DatasetCacheOptions options) {
  if (options.cache_dir.empty()) {
    return absl::InvalidArgumentError("the dataset cache needs a cache directory");
  }
  std::string dir = options.cache_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  dir += "/datasets";
  for (const std::string& d : {options.cache_dir, dir}) {
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::UnavailableError(Errno("cannot create the dataset cache directory", d));
    }
  }
  return std::unique_ptr<DatasetCache>(new DatasetCache(std::move(options), std::move(dir)));
}

std::string DatasetCache::DataPath(const std::string& key) const {
  return absl::StrCat(dir_, "/", key, ".h5");
}
std::string DatasetCache::MetaPath(const std::string& key) const {
  return absl::StrCat(dir_, "/", key, ".meta");
}
std::string DatasetCache::PartPath(const std::string& key) const {
  return absl::StrCat(dir_, "/", key, ".h5.part");
}
std::string DatasetCache::LockPath(const std::string& key) const {
  return absl::StrCat(dir_, "/", key, ".lock");
}

void DatasetCache::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    GANTRY_LOG(INFO) << "dataset cache: " << line;
  }
}

absl::StatusOr<DatasetCache::Lease> DatasetCache::Acquire(const std::string& key,
                                                          const DatasetFill& fill) {
  if (!fill.fill) return absl::InvalidArgumentError("DatasetFill without a fill function");
  return AcquireImpl(key, &fill);
}

namespace {

// The process-wide totals behind ProcessDatasetCacheCounters.
std::atomic<int64_t> g_hits{0};
std::atomic<int64_t> g_misses{0};
std::atomic<int64_t> g_filled_bytes{0};
std::atomic<int64_t> g_evictions{0};
std::atomic<int64_t> g_evicted_bytes{0};

}  // namespace

DatasetCacheCounters ProcessDatasetCacheCounters() {
  DatasetCacheCounters counters;
  counters.hits = g_hits.load();
  counters.misses = g_misses.load();
  counters.filled_bytes = g_filled_bytes.load();
  counters.evictions = g_evictions.load();
  counters.evicted_bytes = g_evicted_bytes.load();
  return counters;
}

absl::StatusOr<DatasetCache::Lease> DatasetCache::AcquireCached(const std::string& key) {
  return AcquireImpl(key, nullptr);
}

absl::StatusOr<DatasetCache::Lease> DatasetCache::AcquireImpl(const std::string& key,
                                                              const DatasetFill* fill) {
  if (!IsSha256Hex(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset cache key \"", key, "\" is not a lowercase sha256 hex"));
  }
  Lease lease;
  {
    // One process at a time checks or fills this key; the others wait here and then reuse it.
    ASSIGN_OR_RETURN(Fd lock, LockFile(LockPath(key), LOCK_EX));
    absl::StatusOr<Lease> cached = PinAndVerify(key);
    if (cached.ok()) {
      DatasetCacheEntry touched = cached->entry_;
      touched.last_used = std::max(absl::Now(), touched.last_used + absl::Microseconds(1));
      touched.path.clear();
      RETURN_IF_ERROR(gantry::WriteFileAtomically(MetaPath(key), {FormatMeta(touched)}));
      cached->entry_.last_used = touched.last_used;
      ++g_hits;
      return cached;
    }
    if (cached.status().code() == absl::StatusCode::kDataLoss) {
      Log(absl::StrCat("entry ", key, " failed verification (", cached.status().message(),
                       "); removed", fill != nullptr ? ", filling it again" : ""));
      RemoveEntryFiles(key);
      if (fill == nullptr) return cached.status();
    } else if (cached.status().code() != absl::StatusCode::kNotFound || fill == nullptr) {
      return cached.status();
    }
    ++g_misses;
    if (absl::Status filled = FillEntry(key, *fill); !filled.ok()) {
      ::unlink(LockPath(key).c_str());  // leave no trace but a resumable .part (see LockFile)
      return filled;
    }
    // Pin the new entry before the fill lock goes, so an evictor never sees it unpinned.
    Fd data(::open(DataPath(key).c_str(), O_RDONLY | O_CLOEXEC));
    if (data.get() < 0 || FlockRetry(data.get(), LOCK_SH) != 0) {
      return absl::UnavailableError(Errno("cannot pin", DataPath(key)));
    }
    ASSIGN_OR_RETURN(lease.entry_, ReadMeta(MetaPath(key)));
    lease.entry_.path = DataPath(key);
    lease.fd_ = data.release();
    lease.filled_ = true;
    g_filled_bytes += lease.entry_.size_bytes;
  }
  if (options_.max_bytes > 0) EvictToLimit();
  return lease;
}

absl::StatusOr<DatasetCache::Lease> DatasetCache::PinAndVerify(const std::string& key) {
  ASSIGN_OR_RETURN(DatasetCacheEntry entry, ReadMeta(MetaPath(key)));
  if (entry.key != key) {
    return absl::DataLossError(absl::StrCat("metadata names key ", entry.key));
  }
  const std::string path = DataPath(key);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " is missing"));
    return absl::UnavailableError(Errno("cannot open", path));
  }
  if (FlockRetry(fd.get(), LOCK_SH) != 0) return absl::UnavailableError(Errno("cannot pin", path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return absl::UnavailableError(Errno("cannot stat", path));
  if (st.st_size != entry.size_bytes) {
    return absl::DataLossError(
        absl::StrCat(path, " has ", st.st_size, " bytes, its metadata says ", entry.size_bytes));
  }
  int64_t size = 0;
  ASSIGN_OR_RETURN(std::string sha, HashFd(fd.get(), path, &size));
  if (sha != entry.sha256 || size != entry.size_bytes) {
    return absl::DataLossError(
        absl::StrCat(path, " hashes to ", sha, ", its metadata says ", entry.sha256));
  }
  Lease lease;
  entry.path = path;
  lease.entry_ = std::move(entry);
  lease.fd_ = fd.release();
  return lease;
}

absl::Status DatasetCache::FillEntry(const std::string& key, const DatasetFill& fill) {
  const std::string part = PartPath(key);
  ASSIGN_OR_RETURN(auto attributes, fill.fill(part));
  Fd fd(::open(part.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return absl::UnavailableError(Errno("the filler left no", part));
  int64_t size = 0;
  ASSIGN_OR_RETURN(std::string sha, HashFd(fd.get(), part, &size));
  if (fill.key_is_content_sha256 && sha != key) {
    ::unlink(part.c_str());
    return absl::DataLossError(absl::StrCat("the filled bytes hash to ", sha, ", expected ", key,
                                            "; the partial file was removed"));
  }
  if (::fsync(fd.get()) != 0) return absl::UnavailableError(Errno("cannot fsync", part));
  fd.Reset();
  DatasetCacheEntry entry;
  entry.key = key;
  entry.sha256 = sha;
  entry.size_bytes = size;
  entry.source = fill.source;
  entry.created = absl::Now();
  entry.last_used = entry.created;
  entry.attributes = std::move(attributes);
  // The metadata goes first: a data file is only ever visible with its metadata beside it.
  RETURN_IF_ERROR(gantry::WriteFileAtomically(MetaPath(key), {FormatMeta(entry)}));
  if (::rename(part.c_str(), DataPath(key).c_str()) != 0) {
    return absl::UnavailableError(Errno("cannot move into the cache:", part));
  }
  return FsyncPath(dir_, /*directory=*/true);
}

void DatasetCache::RemoveEntryFiles(const std::string& key) {
  ::unlink(DataPath(key).c_str());
  ::unlink(MetaPath(key).c_str());
}

std::vector<DatasetCacheEntry> DatasetCache::List() const {
  std::vector<DatasetCacheEntry> entries;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return entries;
  while (const dirent* de = ::readdir(d)) {
    const std::string name = de->d_name;
    if (!absl::EndsWith(name, ".meta")) continue;
    const std::string key = name.substr(0, name.size() - 5);
    if (!IsSha256Hex(key)) continue;
    absl::StatusOr<DatasetCacheEntry> e = ReadMeta(MetaPath(key));
    if (!e.ok() || e->key != key) continue;
    struct stat st;
    // A .part (or a data file whose size disagrees, i.e. one being replaced) is not an entry.
    if (::stat(DataPath(key).c_str(), &st) != 0 || st.st_size != e->size_bytes) continue;
    e->path = DataPath(key);
    entries.push_back(*std::move(e));
  }
  ::closedir(d);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.last_used != b.last_used ? a.last_used < b.last_used : a.key < b.key;
  });
  return entries;
}

DatasetCacheSummary DatasetCache::Summary() const {
  DatasetCacheSummary summary;
  for (DatasetCacheEntry& e : List()) {
    summary.bytes += e.size_bytes;
    summary.keys.push_back(std::move(e.key));
  }
  std::sort(summary.keys.begin(), summary.keys.end());
  return summary;
}

std::vector<std::string> DatasetCache::EvictToLimit() {
  std::vector<std::string> evicted;
  if (options_.max_bytes <= 0) return evicted;
  std::vector<DatasetCacheEntry> entries = List();
  int64_t total = 0;
  for (const DatasetCacheEntry& e : entries) total += e.size_bytes;
  int pinned = 0;
  for (const DatasetCacheEntry& e : entries) {
    if (total <= options_.max_bytes) break;
    // The key's lock first (an acquirer holds it between opening and pinning), then the data
    // file itself: a shared flock on it is a pin held by a Lease somewhere.
    bool busy = false;
    absl::StatusOr<Fd> lock = LockFile(LockPath(e.key), LOCK_EX | LOCK_NB, &busy);
    if (!lock.ok() || busy) {
      ++pinned;
      continue;
    }
    Fd data(::open(e.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (data.get() < 0) continue;  // gone meanwhile
    if (FlockRetry(data.get(), LOCK_EX | LOCK_NB) != 0) {
      ++pinned;
      continue;
    }
    RemoveEntryFiles(e.key);
    ::unlink(LockPath(e.key).c_str());  // while holding it: waiters re-open (see LockFile)
    total -= e.size_bytes;
    evicted.push_back(e.key);
    ++g_evictions;
    g_evicted_bytes += e.size_bytes;
    Log(absl::StrFormat("evicted %s (%d bytes, %s, last used %s); %d bytes remain, limit %d", e.key,
                        e.size_bytes, e.source, absl::FormatTime(e.last_used), total,
                        options_.max_bytes));
  }
  if (total > options_.max_bytes) {
    Log(
        absl::StrFormat("holds %d bytes, over its limit of %d: the %d remaining least-recently-"
                        "used entries that would go are in use (pinned)",
                        total, options_.max_bytes, pinned));
  }
  return evicted;
}

}  // namespace gantry::runner
