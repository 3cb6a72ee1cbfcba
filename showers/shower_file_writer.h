// ShowerFileWriter: writes a 3DGAN shower file incrementally (extendable, chunked datasets), so a
// stream of showers is appended block by block and never held in memory as a whole.
#ifndef GANTRY_SHOWERS_SHOWER_FILE_WRITER_H_
#define GANTRY_SHOWERS_SHOWER_FILE_WRITER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "showers/shower_set.h"

namespace gantry::showers {

struct ShowerFileWriterOptions {
  Layout layout = Layout::kFixedAngle3DGan;  // kFixedAngle3DGan or kVariableAngle3DGan
  std::string particle = "Ele";              // Ele, Gamma, Pi0, ChPi (PDG id in 'target')
  int gzip_level = 4;                        // 0 disables compression of ECAL
  int64_t chunk_events = 0;                  // events per HDF5 chunk of ECAL; 0 = ~1 MiB chunks
};

// The layout whose grid is `shape`: (25,25,25) is 3DGAN fixed angle, (51,51,25) 3DGAN variable
// angle; INVALID_ARGUMENT for any other shape.
absl::StatusOr<Layout> Layout3DGanForShape(const std::array<int64_t, 3>& shape);

// Writes the same keys as WriteShowerFile: fixed angle ECAL float32 (N,25,25,25) and target
// float32 (N,4) = [PDG id, E, 0, 0]; variable angle ECAL (N,51,51,25), energy, theta, mtheta
// (measured angle, 100 for an empty shower), eta and sum; and the root attribute "particle".
// ReadShowerFile and h5py read the result. Every dataset starts empty and grows by Append(); the
// file on disk is consistent (readable, all datasets of equal length) after every successful
// Append(), which flushes it.
// Not thread-safe: one thread appends. The destructor closes the file if Close() was not called.
class ShowerFileWriter {
 public:
  // Creates (truncates) `path`. INVALID_ARGUMENT for a CaloChallenge layout or unknown particle;
  // DATA_LOSS (naming the path) when the file cannot be created.
  static absl::StatusOr<std::unique_ptr<ShowerFileWriter>> Create(
      const std::string& path, const ShowerFileWriterOptions& options);

  ~ShowerFileWriter();
  ShowerFileWriter(const ShowerFileWriter&) = delete;
  ShowerFileWriter& operator=(const ShowerFileWriter&) = delete;

  // Appends `events` showers: `cells` holds events x cells_per_event() floats (GeV, C order of
  // (N,x,y,z)), `energy_gev` one primary energy per event, `theta_rad` one angle per event
  // (required for the variable-angle layout, ignored for fixed angle; may be null there).
  // INVALID_ARGUMENT on negative/NaN cells or non-positive energies; FAILED_PRECONDITION after
  // Close().
  absl::Status Append(const float* cells, int64_t events, const float* energy_gev,
                      const float* theta_rad);
  // Appends a whole set (same layout as the writer's).
  absl::Status Append(const ShowerSet& set);

  // Flushes and closes the file. Further Append() calls fail.
  absl::Status Close();

  int64_t events() const { return events_; }
  const std::array<int64_t, 3>& shape() const { return shape_; }
  int64_t cells_per_event() const { return shape_[0] * shape_[1] * shape_[2]; }
  Layout layout() const { return options_.layout; }
  const std::string& path() const { return path_; }

 private:
  struct Files;  // the HDF5 handles (kept out of this header)
  ShowerFileWriter(std::string path, ShowerFileWriterOptions options);

  const std::string path_;
  const ShowerFileWriterOptions options_;
  std::array<int64_t, 3> shape_{25, 25, 25};
  std::unique_ptr<Files> files_;  // null once closed
  int64_t events_ = 0;
};

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_SHOWER_FILE_WRITER_H_
