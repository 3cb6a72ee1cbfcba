#include "storage/blob_store.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"

namespace gantry::storage {

namespace {
constexpr char kTempSuffix[] = ".tmp";
constexpr size_t kVerifyChunk = 1 << 20;
}  // namespace

BlobStore::BlobStore(std::string data_dir, FileSystem* fs)
    : data_dir_(std::move(data_dir)),
      blobs_dir_(data_dir_ + "/blobs"),
      tmp_dir_(data_dir_ + "/blobs/tmp"),
      fs_(fs) {}

absl::StatusOr<std::unique_ptr<BlobStore>> BlobStore::Create(const std::string& data_dir,
                                                             FileSystem* fs) {
  if (data_dir.empty()) return absl::InvalidArgumentError("the blob store needs a --data-dir");
  if (fs == nullptr) fs = FileSystem::Default();
  std::unique_ptr<BlobStore> store(new BlobStore(data_dir, fs));
  RETURN_IF_ERROR(fs->CreateDirs(store->tmp_dir_));
  // Temp files are never blobs: whatever a crashed writer left behind is garbage.
  ASSIGN_OR_RETURN(std::vector<std::string> stale, fs->ListDir(store->tmp_dir_));
  for (const std::string& name : stale) {
    if (absl::EndsWith(name, kTempSuffix)) (void)fs->Remove(store->tmp_dir_ + "/" + name);
  }
  return store;
}

bool BlobStore::IsValidSha256(const std::string& sha256) {
  if (sha256.size() != 64) return false;
  for (char c : sha256) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

namespace {
absl::Status BadSha(const std::string& sha256) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", sha256.substr(0, 80), "\" is not a sha256 (64 lower-case hex digits)"));
}
}  // namespace

std::string BlobStore::Path(const std::string& sha256) const {
  return absl::StrCat(blobs_dir_, "/", sha256.substr(0, 2), "/", sha256);
}

absl::StatusOr<std::unique_ptr<BlobWriter>> BlobStore::NewWriter() {
  std::string tmp = absl::StrCat(tmp_dir_, "/", sql::RandomHex(16), kTempSuffix);
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs_->NewWritableFile(tmp));
  return std::unique_ptr<BlobWriter>(new BlobWriter(fs_, tmp, blobs_dir_, std::move(file)));
}

absl::StatusOr<std::unique_ptr<BlobReader>> BlobStore::Open(const std::string& sha256,
                                                            int64_t offset) {
  if (!IsValidSha256(sha256)) return BadSha(sha256);
  const std::string path = Path(sha256);
  absl::StatusOr<int64_t> size = fs_->FileSize(path);
  if (absl::IsNotFound(size.status())) {
    return absl::NotFoundError(absl::StrCat("blob ", sha256, " is not stored"));
  }
  if (!size.ok()) return size.status();
  if (offset < 0 || offset > *size) {
    return absl::OutOfRangeError(
        absl::StrCat("offset ", offset, " is outside blob ", sha256, " of ", *size, " bytes"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file, fs_->NewReadableFile(path));
  std::unique_ptr<BlobReader> reader(new BlobReader(sha256, *size, std::move(file)));
  RETURN_IF_ERROR(reader->SkipTo(offset));
  return reader;
}

absl::Status BlobStore::Verify(const std::string& sha256) {
  ASSIGN_OR_RETURN(std::unique_ptr<BlobReader> reader, Open(sha256));
  while (true) {
    ASSIGN_OR_RETURN(std::string chunk, reader->Read(kVerifyChunk));
    if (chunk.empty()) return absl::OkStatus();
  }
}

bool BlobStore::Exists(const std::string& sha256) {
  return IsValidSha256(sha256) && fs_->FileExists(Path(sha256));
}

absl::StatusOr<int64_t> BlobStore::Size(const std::string& sha256) {
  if (!IsValidSha256(sha256)) return BadSha(sha256);
  absl::StatusOr<int64_t> size = fs_->FileSize(Path(sha256));
  if (absl::IsNotFound(size.status())) {
    return absl::NotFoundError(absl::StrCat("blob ", sha256, " is not stored"));
  }
  return size;
}

absl::Status BlobStore::Remove(const std::string& sha256) {
  if (!IsValidSha256(sha256)) return BadSha(sha256);
  absl::Status s = fs_->Remove(Path(sha256));
  if (absl::IsNotFound(s))
    return absl::NotFoundError(absl::StrCat("blob ", sha256, " is not stored"));
  return s;
}

absl::StatusOr<std::vector<std::string>> BlobStore::List() {
  std::vector<std::string> shas;
  ASSIGN_OR_RETURN(std::vector<std::string> fanout, fs_->ListDir(blobs_dir_));
  for (const std::string& dir : fanout) {
    if (dir.size() != 2) continue;
    absl::StatusOr<std::vector<std::string>> names = fs_->ListDir(blobs_dir_ + "/" + dir);
    if (absl::IsNotFound(names.status())) continue;  // removed meanwhile
    if (!names.ok()) return names.status();
    for (std::string& name : *names) {
      if (IsValidSha256(name) && name.compare(0, 2, dir) == 0) shas.push_back(std::move(name));
    }
  }
  return shas;
}

absl::StatusOr<int> BlobStore::RemoveTempFilesOlderThan(absl::Time cutoff) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDir(tmp_dir_));
  int removed = 0;
  for (const std::string& name : names) {
    if (!absl::EndsWith(name, kTempSuffix)) continue;
    const std::string path = tmp_dir_ + "/" + name;
    absl::StatusOr<absl::Time> modified = fs_->ModifiedTime(path);
    if (!modified.ok() || *modified >= cutoff) continue;
    if (fs_->Remove(path).ok()) ++removed;
  }
  return removed;
}

}  // namespace gantry::storage
