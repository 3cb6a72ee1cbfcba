// Hdf5Io: reads, writes and inspects shower files in the layouts of reference section C (3DGAN
// fixed angle, 3DGAN variable angle, CaloChallenge) through the HDF5 C library; every failure is an
// absl::Status naming the file, the dataset and the problem.
#ifndef GANTRY_SHOWERS_HDF5_IO_H_
#define GANTRY_SHOWERS_HDF5_IO_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "showers/shower_file_limits.h"
#include "showers/shower_set.h"

namespace gantry::showers {

// What a shower file holds, found without loading all its cells at once.
struct DatasetInfo {
  Layout layout = Layout::kFixedAngle3DGan;
  std::array<int64_t, 3> shape{0, 0, 0};  // per-event shape as in ShowerSet::shape
  int64_t events = 0;
  double energy_min_gev = 0, energy_max_gev = 0;
  bool has_theta = false;  // variable-angle files only
  double theta_min_rad = 0, theta_max_rad = 0;
  // From the file-name prefix (Ele, Pi0, ChPi, Gamma), else a root attribute "particle" written by
  // WriteShowerFile, else empty (unknown).
  std::string particle;
  double total_deposit_gev = 0;  // sum of all cells (sanity figure for listings)
};

// Reads a whole file into memory (GeV). Layout detected from the keys: "showers" +
// "incident_energies" is CaloChallenge (MeV, converted); "ECAL" + "target" is 3DGAN fixed angle;
// "ECAL" + "energy" + "theta" (or "mtheta" when "theta" is absent) is 3DGAN variable angle. float64
// and integer datasets are converted. HCAL, mtheta, eta, sum are otherwise ignored.
// Errors: NOT_FOUND (no file); INVALID_ARGUMENT (not HDF5, missing key, wrong rank/shape,
// unsupported voxel count, NaN/Inf or negative cells, non-positive primary energies, angles outside
// [0, pi]); DATA_LOSS (truncated or unreadable data). Messages start with the path and name the
// dataset (and the event where it applies).
absl::StatusOr<ShowerSet> ReadShowerFile(const std::string& path);

// Reads events [first, first + count) only (count is clipped at the end of the file).
absl::StatusOr<ShowerSet> ReadShowerEvents(const std::string& path, int64_t first, int64_t count);

// How InspectShowerFile reads an untrusted file.
struct InspectOptions {
  ShowerFileLimits limits;
  // Named in messages instead of the path (e.g. the file name a client uploaded); empty = the path.
  // The particle is also guessed from it.
  std::string display_name;
};

// Checks the whole file (layout, shapes, every size against options.limits before anything is
// allocated, every cell for NaN/negative values, read in chunks of bounded memory) and summarises
// it. Same errors as ReadShowerFile; a file outside the limits, claiming data it does not store,
// or referring to other files (external links, external raw data, virtual datasets) is
// INVALID_ARGUMENT. Never throws; HDF5 errors become statuses. Thread-safe.
absl::StatusOr<DatasetInfo> InspectShowerFile(const std::string& path,
                                              const InspectOptions& options = {});
// The same for an open file descriptor (read through /proc/self/fd; the caller keeps it open).
absl::StatusOr<DatasetInfo> InspectShowerFd(int fd, const InspectOptions& options = {});
// The same for a file's bytes in memory (HDF5's core driver; the entry point for fuzzing).
absl::StatusOr<DatasetInfo> InspectShowerImage(absl::string_view bytes,
                                               const InspectOptions& options = {});

struct WriteOptions {
  bool write_hcal = false;  // fixed angle: also write a zero HCAL (N,5,5,60) placeholder
  int gzip_level = 4;       // 0 disables compression (CaloChallenge files are gzip in the original)
};

// Writes `set` in its layout so h5py and the Python reference implementations read it: fixed angle
// writes ECAL float32 (N,25,25,25) and target float32 (N,4) = [PDG id, E, 0, 0]; variable angle
// writes ECAL, energy, theta, mtheta (MeasureThetaRad; 100 for an empty shower, as the reference),
// eta and sum; CaloChallenge writes incident_energies (N,1) and showers (N, voxels) in MeV. Every
// file gets a root string attribute "particle". Overwrites `path`.
absl::Status WriteShowerFile(const std::string& path, const ShowerSet& set,
                             const WriteOptions& options = {});

// "Ele", "Pi0", "ChPi", "Gamma" when the base name of `path` starts with one of them, else "".
std::string ParticleFromFileName(const std::string& path);

// "3dgan-fixed-angle", "3dgan-variable-angle", "calochallenge".
const char* LayoutName(Layout layout);

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_HDF5_IO_H_
