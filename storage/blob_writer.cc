#include "storage/blob_writer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace gantry::storage {

BlobWriter::BlobWriter(FileSystem* fs, std::string tmp_path, std::string blobs_dir,
                       std::unique_ptr<WritableFile> file)
    : fs_(fs),
      tmp_path_(std::move(tmp_path)),
      blobs_dir_(std::move(blobs_dir)),
      file_(std::move(file)) {}

BlobWriter::~BlobWriter() { Abort(); }

absl::Status BlobWriter::Append(absl::string_view data) {
  if (finished_) return absl::FailedPreconditionError("the blob writer is already finished");
  absl::Status s = file_->Append(data);
  if (!s.ok()) {
    Abort();
    return s;
  }
  sha_.Update(data);
  size_ += static_cast<int64_t>(data.size());
  return absl::OkStatus();
}

absl::StatusOr<BlobInfo> BlobWriter::Commit(
    const std::optional<std::string>& expected_sha256,
    const std::function<absl::Status(const std::string& sha256)>& before_publish) {
  if (finished_) return absl::FailedPreconditionError("the blob writer is already finished");
  BlobInfo info;
  info.sha256 = sha_.HexDigest();
  info.size_bytes = size_;
  if (expected_sha256.has_value() && *expected_sha256 != info.sha256) {
    Abort();
    return absl::DataLossError(absl::StrCat("the received ", size_, " bytes hash to ", info.sha256,
                                            ", not the expected ", *expected_sha256,
                                            "; nothing was stored, send the file again"));
  }
  absl::Status s = file_->Sync();
  if (s.ok()) s = file_->Close();
  const std::string dir = absl::StrCat(blobs_dir_, "/", info.sha256.substr(0, 2));
  if (s.ok() && before_publish) s = before_publish(info.sha256);
  if (s.ok()) s = fs_->CreateDirs(dir);
  if (s.ok()) s = fs_->Rename(tmp_path_, absl::StrCat(dir, "/", info.sha256));
  if (!s.ok()) {
    Abort();
    return s;
  }
  finished_ = true;
  file_.reset();
  // Make the rename (and a freshly created fan-out directory) durable.
  RETURN_IF_ERROR(fs_->SyncDir(dir));
  RETURN_IF_ERROR(fs_->SyncDir(blobs_dir_));
  return info;
}

void BlobWriter::Abort() {
  if (finished_) return;
  finished_ = true;
  if (file_ != nullptr) (void)file_->Close();
  file_.reset();
  (void)fs_->Remove(tmp_path_);
}

}  // namespace gantry::storage
