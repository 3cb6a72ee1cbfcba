// ShowerOutput: the file `gantry generate` writes, filled chunk by chunk as GenerateChunk messages
// arrive (never the whole request in memory): HDF5 in the 3DGAN layout of the showers' grid, or a
// NumPy .npy array. It is written as `<path>.part` and renamed to `path` only when complete.
#ifndef GANTRY_CLIENTS_CLI_SHOWER_OUTPUT_H_
#define GANTRY_CLIENTS_CLI_SHOWER_OUTPUT_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/generation.pb.h"
#include "showers/stream/chunk_hdf5_writer.h"

namespace gantry::cli {

class ShowerOutput {
 public:
  enum class Format { kHdf5, kNpy };
  // kNpy for a name ending in ".npy", else kHdf5.
  static Format FormatForPath(const std::string& path);

  // Prepares `path` for `expected_showers` showers of `particle` ("Ele", "Gamma", "Pi0", "ChPi";
  // written into HDF5 files). Creates `<path>.part` at once (so an unwritable directory fails
  // before any generation); the layout is fixed by the first chunk's shape.
  static absl::StatusOr<std::unique_ptr<ShowerOutput>> Create(const std::string& path,
                                                              const std::string& particle,
                                                              int64_t expected_showers);
  ~ShowerOutput();
  ShowerOutput(const ShowerOutput&) = delete;
  ShowerOutput& operator=(const ShowerOutput&) = delete;

  // Appends one chunk. INVALID_ARGUMENT when the chunk is malformed (byte count not matching its
  // shape, one condition per shower missing, out-of-order offset, a grid different from earlier
  // chunks, more showers than expected, a grid without a 3DGAN layout for HDF5).
  absl::Status Append(const v1::GenerateChunk& chunk);

  // Closes the file and renames `<path>.part` to `path`. FAILED_PRECONDITION when fewer showers
  // than expected arrived (the .part file is left for inspection).
  absl::Status Finish();

  int64_t showers() const { return showers_; }
  const std::string& path() const { return path_; }
  std::string part_path() const { return path_ + ".part"; }
  Format format() const { return format_; }

 private:
  ShowerOutput(std::string path, std::string particle, int64_t expected, Format format)
      : path_(std::move(path)),
        particle_(std::move(particle)),
        expected_(expected),
        format_(format) {}
  const std::string path_;
  const std::string particle_;
  const int64_t expected_;
  const Format format_;
  std::vector<int64_t> grid_;  // .npy: (x, y, z) once the first chunk arrived
  std::unique_ptr<showers::ChunkHdf5Writer> hdf5_;
  std::FILE* npy_ = nullptr;
  int64_t showers_ = 0;
  bool finished_ = false;
};

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_SHOWER_OUTPUT_H_
