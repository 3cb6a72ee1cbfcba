#include "clients/cli/shower_output.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "clients/cli/npy_writer.h"

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

absl::Status ShowerOutput::Open(const v1::GenerateChunk& first) {
  grid_.assign(first.shape().begin() + 1, first.shape().end());
  if (format_ == Format::kNpy) {
    npy_ = std::fopen(part_path().c_str(), "wb");
    if (npy_ == nullptr) return Errno("cannot create", part_path());
    const std::string header = NpyHeader({expected_, grid_[0], grid_[1], grid_[2]});
    if (std::fwrite(header.data(), 1, header.size(), npy_) != header.size()) {
      return Errno("cannot write", part_path());
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(showers::Layout layout,
                   showers::Layout3DGanForShape({grid_[0], grid_[1], grid_[2]}));
  showers::ShowerFileWriterOptions options;
  options.layout = layout;
  options.particle = particle_;
  ASSIGN_OR_RETURN(hdf5_, showers::ShowerFileWriter::Create(part_path(), options));
  return absl::OkStatus();
}

absl::Status ShowerOutput::Append(const v1::GenerateChunk& chunk) {
  if (finished_) return absl::FailedPreconditionError("the output is already finished");
  if (chunk.shape_size() != 4 || chunk.shape(0) < 0 || chunk.shape(1) <= 0 || chunk.shape(2) <= 0 ||
      chunk.shape(3) <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk at offset ", chunk.offset(), " has shape [",
                     absl::StrJoin(chunk.shape(), ","), "], expected [n,x,y,z]"));
  }
  const int64_t n = chunk.shape(0);
  if (n == 0) return absl::OkStatus();
  const int64_t per_shower = chunk.shape(1) * chunk.shape(2) * chunk.shape(3);
  if (static_cast<int64_t>(chunk.showers().size()) != n * per_shower * 4) {
    return absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.offset(), " carries ",
                                                   chunk.showers().size(), " bytes for ", n,
                                                   " showers of ", per_shower, " float32 cells"));
  }
  if (chunk.conditions_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.offset(), " has ",
                                                   chunk.conditions_size(), " conditions for ", n,
                                                   " showers"));
  }
  if (chunk.offset() != showers_) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk at offset ", chunk.offset(), " arrived after ", showers_, " showers"));
  }
  if (showers_ + n > expected_) {
    return absl::InvalidArgumentError(absl::StrCat("the server sent more showers (", showers_ + n,
                                                   ") than requested (", expected_, ")"));
  }
  if (grid_.empty()) {
    RETURN_IF_ERROR(Open(chunk));
  } else if (!std::equal(grid_.begin(), grid_.end(), chunk.shape().begin() + 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk at offset ", chunk.offset(), " has grid ", absl::StrJoin(chunk.shape(), "x"),
        " unlike the earlier ", absl::StrJoin(grid_, "x")));
  }
  if (npy_ != nullptr) {
    if (std::fwrite(chunk.showers().data(), 1, chunk.showers().size(), npy_) !=
        chunk.showers().size()) {
      return Errno("cannot write", part_path());
    }
  } else {
    // Packed little-endian float32 on the wire; this client runs on little-endian machines.
    std::vector<float> cells(static_cast<size_t>(n * per_shower));
    std::memcpy(cells.data(), chunk.showers().data(), chunk.showers().size());
    std::vector<float> energy(n), theta(n);
    for (int64_t i = 0; i < n; ++i) {
      energy[i] = static_cast<float>(chunk.conditions(i).energy_gev());
      theta[i] = static_cast<float>(chunk.conditions(i).theta_rad());
    }
    RETURN_IF_ERROR(hdf5_->Append(cells.data(), n, energy.data(), theta.data()));
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
