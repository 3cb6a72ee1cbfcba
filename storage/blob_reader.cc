#include "storage/blob_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gantry::storage {

BlobReader::BlobReader(std::string sha256, int64_t size, std::unique_ptr<ReadableFile> file)
    : sha256_(std::move(sha256)), size_(size), file_(std::move(file)) {}

BlobReader::~BlobReader() = default;

absl::Status BlobReader::SkipTo(int64_t offset) {
  std::string buf(1 << 20, '\0');
  while (offset_ < offset) {
    size_t want = static_cast<size_t>(std::min<int64_t>(offset - offset_, buf.size()));
    absl::StatusOr<size_t> n = file_->Read(buf.data(), want);
    if (!n.ok()) return n.status();
    if (*n == 0) {
      return absl::DataLossError(absl::StrCat("blob ", sha256_, " is shorter than recorded"));
    }
    sha_.Update(absl::string_view(buf.data(), *n));
    offset_ += static_cast<int64_t>(*n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> BlobReader::Read(size_t max_bytes) {
  if (done_) {
    if (!end_status_.ok()) return end_status_;
    return std::string();
  }
  if (max_bytes == 0) return absl::InvalidArgumentError("BlobReader::Read needs max_bytes > 0");
  std::string chunk(max_bytes, '\0');
  absl::StatusOr<size_t> n = file_->Read(chunk.data(), max_bytes);
  if (!n.ok()) return n.status();
  if (*n > 0) {
    chunk.resize(*n);
    sha_.Update(chunk);
    offset_ += static_cast<int64_t>(*n);
    if (offset_ > size_) {
      return absl::DataLossError(absl::StrCat("blob ", sha256_, " grew while being read"));
    }
    return chunk;
  }
  // End of file: the whole content must hash to the blob's name.
  done_ = true;
  const std::string actual = sha_.HexDigest();
  if (offset_ != size_ || actual != sha256_) {
    end_status_ = absl::DataLossError(
        absl::StrCat("blob ", sha256_, " is corrupted: its ", offset_, " stored bytes hash to ",
                     actual, "; restore it from a backup or upload it again"));
    return end_status_;
  }
  return std::string();
}

}  // namespace gantry::storage
