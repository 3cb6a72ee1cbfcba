#include "clients/cli/shower_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "clients/cli/npy_writer.h"
#include "showers/stream/generate_chunk.h"

namespace gantry::cli {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

ShowerOutput::Format ShowerOutput::FormatForPath(const std::string& path) {
  return absl::EndsWith(path, ".npy") ? Format::kNpy : Format::kHdf5;
}

absl::StatusOr<std::unique_ptr<ShowerOutput>> ShowerOutput::Create(const std::string& path,
                                                                   const std::string& particle,
                                                                   int64_t expected_showers) {
  if (path.empty()) return absl::InvalidArgumentError("empty output path");
  if (expected_showers <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a positive shower count, got ", expected_showers));
  }
  std::unique_ptr<ShowerOutput> output(
      new ShowerOutput(path, particle, expected_showers, FormatForPath(path)));
  // Fail now, before the server generates anything, when the file cannot be written.
  std::FILE* probe = std::fopen(output->part_path().c_str(), "wb");
  if (probe == nullptr) return Errno("cannot create", output->part_path());
  std::fclose(probe);
  return output;
}

ShowerOutput::~ShowerOutput() {
  if (npy_ != nullptr) std::fclose(npy_);
  hdf5_.reset();
  // A run that failed before any shower arrived leaves nothing behind.
  if (!finished_ && showers_ == 0) std::remove(part_path().c_str());
}

absl::Status ShowerOutput::Append(const v1::GenerateChunk& chunk) {
  if (finished_) return absl::FailedPreconditionError("the output is already finished");
  if (format_ == Format::kHdf5) {
    if (hdf5_ == nullptr) {
      hdf5_ = std::make_unique<showers::ChunkHdf5Writer>(part_path(), particle_, expected_);
    }
    RETURN_IF_ERROR(hdf5_->Append(chunk));
    showers_ = hdf5_->showers();
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(showers::CheckGenerateChunk(chunk, showers_, expected_, grid_));
  const int64_t n = chunk.shape(0);
  if (n == 0) return absl::OkStatus();
  if (npy_ == nullptr) {
    grid_.assign(chunk.shape().begin() + 1, chunk.shape().end());
    npy_ = std::fopen(part_path().c_str(), "wb");
    if (npy_ == nullptr) return Errno("cannot create", part_path());
    const std::string header = NpyHeader({expected_, grid_[0], grid_[1], grid_[2]});
    if (std::fwrite(header.data(), 1, header.size(), npy_) != header.size()) {
      return Errno("cannot write", part_path());
    }
  }
  if (std::fwrite(chunk.showers().data(), 1, chunk.showers().size(), npy_) !=
      chunk.showers().size()) {
    return Errno("cannot write", part_path());
  }
  showers_ += n;
  return absl::OkStatus();
}

absl::Status ShowerOutput::Finish() {
  if (finished_) return absl::OkStatus();
  if (showers_ != expected_) {
    return absl::FailedPreconditionError(
        absl::StrCat("the stream ended after ", showers_, " of ", expected_,
                     " showers; the partial output is in ", part_path()));
  }
  if (npy_ != nullptr) {
    const bool ok = std::fflush(npy_) == 0;
    const bool closed = std::fclose(npy_) == 0;
    npy_ = nullptr;
    if (!ok || !closed) return Errno("cannot write", part_path());
  }
  if (hdf5_ != nullptr) RETURN_IF_ERROR(hdf5_->Close());
  if (std::rename(part_path().c_str(), path_.c_str()) != 0) {
    return Errno(absl::StrCat("cannot rename ", part_path(), " to"), path_);
  }
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace gantry::cli
