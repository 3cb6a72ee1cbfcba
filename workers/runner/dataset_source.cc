#include "workers/runner/dataset_source.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "base/grpc_status.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "gantry/v1/datasets.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "showers/hdf5_io.h"
#include "showers/shower_file_writer.h"
#include "showers/toy_mc.h"

namespace gantry::runner {
namespace {

namespace fs = std::filesystem;

absl::Status Annotate(const absl::Status& status, const std::string& reference) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("dataset \"", reference, "\": ", status.message()));
}

std::string Format(double v) { return absl::StrFormat("%.17g", v); }

// The ranges a fill records in the entry's attributes.
std::map<std::string, std::string> RangeAttributes(double emin, double emax, bool has_theta,
                                                   double tmin, double tmax) {
  std::map<std::string, std::string> a = {{"energy_min_gev", Format(emin)},
                                          {"energy_max_gev", Format(emax)}};
  if (has_theta) {
    a["theta_min_rad"] = Format(tmin);
    a["theta_max_rad"] = Format(tmax);
  }
  return a;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> DatasetSource::InspectFilled(
    const std::string& path, const std::string& shown) const {
  const showers::SandboxedInspector inspector(options_.inspector);
  absl::StatusOr<showers::DatasetInfo> info = inspector.Inspect(path, shown);
  if (!info.ok()) {
    std::error_code ec;
    fs::remove(path, ec);
    return info.status();
  }
  return RangeAttributes(info->energy_min_gev, info->energy_max_gev, info->has_theta,
                         info->theta_min_rad, info->theta_max_rad);
}

// Reads the ranges back from the entry's attributes (or inspects the file for an entry that has
// none).
absl::Status DatasetSource::SetRanges(const DatasetCacheEntry& entry, const std::string& shown,
                                      MaterializedDataset& d) const {
  std::map<std::string, std::string> a = entry.attributes;
  if (!a.count("energy_min_gev")) {
    ASSIGN_OR_RETURN(a, InspectFilled(entry.path, shown));
  }
  auto get = [&a](const char* name, double* v) {
    auto it = a.find(name);
    if (it != a.end()) absl::SimpleAtod(it->second, v);
  };
  get("energy_min_gev", &d.energy_min_gev);
  get("energy_max_gev", &d.energy_max_gev);
  get("theta_min_rad", &d.theta_min_rad);
  get("theta_max_rad", &d.theta_max_rad);
  return absl::OkStatus();
}

namespace {

absl::Status CheckExpected(const std::string& reference, const std::string& key,
                           const std::string& expected_sha256) {
  if (expected_sha256.empty() || key == expected_sha256) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("dataset \"", reference, "\": sha256 is ", key,
                                          ", the assignment expects ", expected_sha256));
}

// Copies `from` into `to` (truncating), feeding the bytes copied to `hasher` when not null.
absl::Status CopyFile(const std::string& from, const std::string& to, Sha256* hasher) {
  std::ifstream in(from, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(from, " cannot be opened"));
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", to));
  std::string buffer(1 << 20, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    if (hasher != nullptr) hasher->Update(absl::string_view(buffer.data(), static_cast<size_t>(n)));
    out.write(buffer.data(), n);
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(from, ": read error"));
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("write to ", to, " failed"));
  return absl::OkStatus();
}

// Copies `from` into `to` (truncating) and returns the sha256 of the bytes copied.
absl::StatusOr<std::string> CopyHashing(const std::string& from, const std::string& to) {
  Sha256 hasher;
  RETURN_IF_ERROR(CopyFile(from, to, &hasher));
  return hasher.HexDigest();
}

// A file:// source held open (O_NOFOLLOW) while it is stamped, copied and hashed; fd_path() is
// its /proc/self/fd link, which reopens exactly this file.
class OpenSource {
 public:
  static absl::StatusOr<std::unique_ptr<OpenSource>> Open(const std::string& resolved) {
    const int fd = ::open(resolved.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      return errno == ENOENT ? absl::NotFoundError(absl::StrCat(resolved, " does not exist"))
                             : absl::PermissionDeniedError(absl::StrCat(
                                   resolved, " cannot be opened: ", std::strerror(errno)));
    }
    return std::unique_ptr<OpenSource>(new OpenSource(fd));
  }
  ~OpenSource() { ::close(fd_); }
  OpenSource(const OpenSource&) = delete;
  OpenSource& operator=(const OpenSource&) = delete;
  std::string fd_path() const { return absl::StrCat("/proc/self/fd/", fd_); }

 private:
  explicit OpenSource(int fd) : fd_(fd) {}
  int fd_;
};

// file:// index: <cache>/datasets/file-index/<sha256(path)> holds "size mtime_ns inode key" of
// the source as last hashed, so an unchanged large source is not read again to find its key.
struct FileStamp {
  int64_t size = 0, mtime_ns = 0, inode = 0;
};

absl::StatusOr<FileStamp> StampOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, " cannot be opened"));
  }
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, " is not a file"));
  return FileStamp{static_cast<int64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                   static_cast<int64_t>(st.st_ino)};
}

std::string IndexPath(const DatasetCache& cache, const std::string& source) {
  return absl::StrCat(cache.dir(), "/file-index/", Sha256Hex(source));
}

// An flock held on a file of the index while one process hashes a source.
class SourceLock {
 public:
  static absl::StatusOr<std::unique_ptr<SourceLock>> Take(const std::string& path) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot open ", path));
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      ::close(fd);
      return absl::UnavailableError(absl::StrCat("cannot lock ", path));
    }
    return std::unique_ptr<SourceLock>(new SourceLock(fd));
  }
  ~SourceLock() { ::close(fd_); }
  SourceLock(const SourceLock&) = delete;
  SourceLock& operator=(const SourceLock&) = delete;

 private:
  explicit SourceLock(int fd) : fd_(fd) {}
  const int fd_;
};

std::string IndexLookup(const DatasetCache& cache, const std::string& source,
                        const FileStamp& stamp) {
  std::ifstream in(IndexPath(cache, source));
  FileStamp s;
  std::string key;
  if (!(in >> s.size >> s.mtime_ns >> s.inode >> key)) return "";
  if (s.size != stamp.size || s.mtime_ns != stamp.mtime_ns || s.inode != stamp.inode) return "";
  return IsSha256Hex(key) ? key : "";
}

void IndexStore(const DatasetCache& cache, const std::string& source, const FileStamp& stamp,
                const std::string& key) {
  std::error_code ec;
  fs::create_directories(cache.dir() + "/file-index", ec);
  const std::string path = IndexPath(cache, source);
  const std::string tmp = absl::StrCat(path, ".", ::getpid(), ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << stamp.size << " " << stamp.mtime_ns << " " << stamp.inode << " " << key << "\n";
    if (!out) return;
  }
  fs::rename(tmp, path, ec);  // best effort: a missing index only costs a re-hash
}

}  // namespace

absl::StatusOr<MaterializedDataset> DatasetSource::Materialize(
    const std::string& reference, const std::string& expected_sha256) const {
  enum { kToyMc, kFile, kServer } kind;
  if (absl::StartsWith(reference, "toymc:")) {
    kind = kToyMc;
  } else if (absl::StartsWith(reference, "file://")) {
    kind = kFile;
  } else if (absl::StartsWith(reference, "ds-")) {
    kind = kServer;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset \"", reference,
                     "\": unknown kind; use ds-<id>, toymc:<key=value,...> or file:///path.h5"));
  }
  if (!expected_sha256.empty() && !IsSha256Hex(expected_sha256)) {
    return absl::InvalidArgumentError(absl::StrCat("dataset \"", reference,
                                                   "\": assignment dataset_sha256 \"",
                                                   expected_sha256, "\" is not a sha256"));
  }
  DatasetCacheOptions cache_options;
  cache_options.cache_dir = options_.cache_dir;
  cache_options.max_bytes = options_.cache_max_bytes;
  absl::StatusOr<std::unique_ptr<DatasetCache>> cache = DatasetCache::Create(cache_options);
  if (!cache.ok()) return Annotate(cache.status(), reference);

  MaterializedDataset out;
  absl::StatusOr<DatasetCache::Lease> lease;
  switch (kind) {
    case kToyMc:
      lease = FromToyMc(**cache, reference, expected_sha256);
      break;
    case kFile:
      lease = FromFile(**cache, reference, expected_sha256);
      out.particle = showers::ParticleFromFileName(reference.substr(std::string("file://").size()));
      break;
    case kServer:
      lease = FromServer(**cache, reference, expected_sha256, &out.downloaded_bytes);
      break;
  }
  if (!lease.ok()) {
    if (absl::StartsWith(lease.status().message(), "dataset \"")) return lease.status();
    return Annotate(lease.status(), reference);
  }
  out.sha256 = lease->entry().key;
  out.local_path = lease->path();
  out.from_cache = !lease->filled();
  if (absl::Status s = SetRanges(lease->entry(), reference, out); !s.ok()) {
    return Annotate(s, reference);
  }
  out.lease = std::make_shared<const DatasetCache::Lease>(*std::move(lease));
  if (options_.load_showers) {
    // Every rank reads the same cached bytes, whoever filled them.
    absl::StatusOr<showers::ShowerSet> showers = showers::ReadShowerFile(out.local_path);
    if (!showers.ok()) return Annotate(showers.status(), reference);
    out.showers = *std::move(showers);
    if (out.showers.particle.empty()) out.showers.particle = out.particle;
  }
  return out;
}

absl::StatusOr<DatasetCache::Lease> DatasetSource::FromToyMc(
    DatasetCache& cache, const std::string& reference, const std::string& expected_sha256) const {
  ASSIGN_OR_RETURN(showers::ToyMcConfig config, showers::ParseToyMcSpec(reference));
  config.threads = std::max(config.threads, std::max(1, options_.threads));
  const std::string key = Sha256Hex(showers::FormatToyMcSpec(config));
  RETURN_IF_ERROR(CheckExpected(reference, key, expected_sha256));
  DatasetFill fill;
  fill.source = reference;
  fill.key_is_content_sha256 = false;  // the key hashes the spec, not the file
  fill.fill = [&](const std::string& part) -> absl::StatusOr<std::map<std::string, std::string>> {
    RETURN_IF_ERROR(showers::ValidateToyMcConfig(config));
    // Simulated in slices of ~256 MiB and appended uncompressed with one event per chunk: no
    // sample is ever held whole, and reading any event is one plain read.
    showers::ShowerFileWriterOptions write;
    write.layout = config.layout;
    write.particle = config.particle;
    write.gzip_level = 0;
    write.chunk_events = 1;
    ASSIGN_OR_RETURN(std::unique_ptr<showers::ShowerFileWriter> writer,
                     showers::ShowerFileWriter::Create(part, write));
    const int64_t event_bytes = writer->cells_per_event() * static_cast<int64_t>(sizeof(float));
    const int64_t slice = std::max<int64_t>(1, (int64_t{256} << 20) / event_bytes);
    for (int64_t first = 0; first < config.events; first += slice) {
      if (options_.stop != nullptr && options_.stop->load()) {
        return absl::CancelledError("toy Monte Carlo simulation cancelled");
      }
      ASSIGN_OR_RETURN(
          showers::ShowerSet set,
          showers::SimulateToyMcRange(config, first, std::min(slice, config.events - first)));
      RETURN_IF_ERROR(writer->Append(set));
    }
    RETURN_IF_ERROR(writer->Close());
    const bool variable = config.layout == showers::Layout::kVariableAngle3DGan;
    return RangeAttributes(config.energy_min_gev, config.energy_max_gev, variable,
                           config.theta_min_rad, config.theta_max_rad);
  };
  return cache.Acquire(key, fill);
}

absl::StatusOr<DatasetCache::Lease> DatasetSource::FromFile(
    DatasetCache& cache, const std::string& reference, const std::string& expected_sha256) const {
  std::string path = reference.substr(std::string("file://").size());
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError("file:// needs an absolute path (file:///data/file.h5)");
  }
  // Allowlisted: resolve, open, and check again what was opened (a symlink swapped in between
  // cannot lead out of a root); every later read goes through the open descriptor.
  std::string read_path = path;  // the index stays keyed by the (resolved) path
  std::unique_ptr<OpenSource> opened;
  if (options_.file_roots.has_value()) {
    std::vector<std::string> denied = options_.denied_dirs;
    denied.push_back(options_.cache_dir);
    const FileRoots* owner =
        options_.owner_file_roots.has_value() ? &*options_.owner_file_roots : nullptr;
    ASSIGN_OR_RETURN(std::string resolved, options_.file_roots->Resolve(path, denied, owner));
    ASSIGN_OR_RETURN(opened, OpenSource::Open(resolved));
    // What was opened is where its descriptor points now: the checked path, or the open lost a
    // race with a link swapped in after the check.
    std::error_code link_ec;
    const fs::path opened_path = fs::read_symlink(opened->fd_path(), link_ec);
    if (link_ec || opened_path.string() != resolved) {
      return absl::PermissionDeniedError(absl::StrCat(path, " changed while it was opened"));
    }
    path = resolved;
    read_path = opened->fd_path();
  }
  ASSIGN_OR_RETURN(FileStamp stamp, StampOf(read_path));
  DatasetFill fill;
  fill.source = reference;
  fill.fill = [&](const std::string& part) -> absl::StatusOr<std::map<std::string, std::string>> {
    // No hashing here: the cache hashes the filled bytes against the key itself.
    RETURN_IF_ERROR(CopyFile(read_path, part, /*hasher=*/nullptr));
    return InspectFilled(part, reference);
  };
  // The key without reading the source: the assignment's hash, else the index of sources hashed
  // before (same size, mtime and inode). Ranks of one worker look the index up one at a time, so
  // only the first copies and hashes the source; the others find its index entry.
  std::unique_ptr<SourceLock> source_lock;
  if (expected_sha256.empty()) {
    ASSIGN_OR_RETURN(source_lock, SourceLock::Take(IndexPath(cache, path) + ".lock"));
  }
  std::string key = expected_sha256;
  if (key.empty()) key = IndexLookup(cache, path, stamp);
  if (!key.empty()) {
    absl::StatusOr<DatasetCache::Lease> lease = cache.Acquire(key, fill);
    if (lease.ok() || expected_sha256 == key) {
      if (lease.ok()) IndexStore(cache, path, stamp, key);
      return lease;
    }
    // A stale index entry (the file changed in place within the mtime resolution): hash again.
  }
  // Unknown key: copy and hash once into a staging file, then hand it to the cache. Only the
  // holder of source_lock writes it, so a leftover of a killed rank is simply overwritten.
  const std::string staging = IndexPath(cache, path) + ".staging";
  absl::StatusOr<std::string> sha = CopyHashing(read_path, staging);
  std::error_code ec;
  if (!sha.ok()) {
    fs::remove(staging, ec);
    return sha.status();
  }
  fill.fill = [&](const std::string& part) -> absl::StatusOr<std::map<std::string, std::string>> {
    std::error_code rename_ec;
    fs::rename(staging, part, rename_ec);
    if (rename_ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot move ", staging, ": ", rename_ec.message()));
    }
    return InspectFilled(part, reference);
  };
  absl::StatusOr<DatasetCache::Lease> lease = cache.Acquire(*sha, fill);
  fs::remove(staging, ec);  // still there when the entry was cached already
  if (lease.ok()) IndexStore(cache, path, stamp, *sha);
  return lease;
}

absl::StatusOr<DatasetCache::Lease> DatasetSource::FromServer(DatasetCache& cache,
                                                              const std::string& reference,
                                                              const std::string& expected_sha256,
                                                              int64_t* downloaded) const {
  *downloaded = 0;
  std::string key = expected_sha256;
  if (key.empty()) {
    // No hash from the assignment: the server announces it in the first chunk.
    absl::StatusOr<std::string> announced = ProbeSha256(reference);
    if (!announced.ok()) return announced.status();
    key = *announced;
    if (!IsSha256Hex(key)) {
      return absl::DataLossError(absl::StrCat("the server announced sha256 \"", key, "\""));
    }
  }
  DatasetFill fill;
  fill.source = reference;
  fill.fill = [&](const std::string& part) -> absl::StatusOr<std::map<std::string, std::string>> {
    // Resumes after the bytes of an interrupted earlier download (the cache verifies the whole).
    int64_t bytes = 0;
    absl::StatusOr<std::string> announced = Download(reference, part, &bytes);
    *downloaded += bytes;
    if (!announced.ok()) return announced.status();
    return InspectFilled(part, reference);
  };
  absl::StatusOr<DatasetCache::Lease> lease = cache.Acquire(key, fill);
  if (!lease.ok() && lease.status().code() == absl::StatusCode::kDataLoss &&
      absl::StrContains(lease.status().message(), "filled bytes hash to")) {
    return absl::DataLossError(absl::StrCat(
        "dataset \"", reference, "\": downloaded bytes do not match the ",
        expected_sha256.empty() ? "sha256 the server announced" : "assignment's sha256", " (",
        lease.status().message(), ")"));
  }
  return lease;
}

absl::StatusOr<std::string> DatasetSource::ProbeSha256(const std::string& id) const {
  if (options_.server.empty()) {
    return absl::InvalidArgumentError("no server address to download it from (--server)");
  }
  auto channel = grpc::CreateChannel(options_.server, ChannelCredentialsFor(options_.tls));
  auto stub = v1::DatasetService::NewStub(channel);
  grpc::ClientContext context;
  if (!options_.token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.token));
  }
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(1)));
  v1::ReadDatasetRequest request;
  request.set_dataset_id(id);
  std::unique_ptr<grpc::ClientReader<v1::DatasetChunk>> reader =
      stub->ReadDataset(&context, request);
  v1::DatasetChunk chunk;
  if (reader->Read(&chunk)) {
    context.TryCancel();
    reader->Finish().ok();
    return chunk.sha256();
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status, absl::StrCat("ReadDataset at ", options_.server));
  return absl::DataLossError("the server sent no chunk");
}

absl::StatusOr<std::string> DatasetSource::Download(const std::string& id, const std::string& part,
                                                    int64_t* bytes) const {
  if (options_.server.empty()) {
    return absl::InvalidArgumentError("no server address to download it from (--server)");
  }
  std::error_code ec;
  int64_t offset = fs::exists(part, ec) ? static_cast<int64_t>(fs::file_size(part, ec)) : 0;
  if (ec) offset = 0;
  std::ofstream out(part, std::ios::binary | (offset > 0 ? std::ios::app : std::ios::trunc));
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", part));

  auto channel = grpc::CreateChannel(options_.server, ChannelCredentialsFor(options_.tls));
  auto stub = v1::DatasetService::NewStub(channel);
  grpc::ClientContext context;
  if (!options_.token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.token));
  }
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ReadDatasetRequest request;
  request.set_dataset_id(id);
  request.set_offset(offset);
  std::unique_ptr<grpc::ClientReader<v1::DatasetChunk>> reader =
      stub->ReadDataset(&context, request);
  v1::DatasetChunk chunk;
  std::string announced;
  int64_t total = -1;
  *bytes = 0;
  while (reader->Read(&chunk)) {
    if (options_.stop != nullptr && options_.stop->load()) {
      context.TryCancel();
      reader->Finish().ok();
      return absl::CancelledError("download cancelled");
    }
    if (!chunk.sha256().empty()) announced = chunk.sha256();
    if (chunk.total_bytes() > 0) total = chunk.total_bytes();
    if (chunk.offset() != offset + *bytes) {
      context.TryCancel();
      reader->Finish().ok();
      return absl::DataLossError(
          absl::StrCat("chunk at offset ", chunk.offset(), ", expected ", offset + *bytes));
    }
    out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    if (!out) return absl::UnavailableError(absl::StrCat("write to ", part, " failed"));
    *bytes += static_cast<int64_t>(chunk.data().size());
  }
  grpc::Status status = reader->Finish();
  out.close();
  if (!status.ok()) return FromGrpcStatus(status, absl::StrCat("ReadDataset at ", options_.server));
  if (total >= 0 && offset + *bytes != total) {
    return absl::DataLossError(
        absl::StrCat("stream ended after ", offset + *bytes, " of ", total, " bytes"));
  }
  return announced;
}

}  // namespace gantry::runner
