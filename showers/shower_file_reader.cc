// The reader keeps the file and the cell dataset open (a chunked one with its cache of decoded
// chunks, showers/chunk_reader.h) and reads runs of consecutive events at once. HDF5's own error
// printing is switched off per thread (the error stack is thread-local in thread-safe builds).
#include "showers/shower_file_reader.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "showers/hdf5_common.h"
#include "showers/hdf5_io.h"

namespace gantry::showers {
namespace {

using h5::LibraryLock;

}  // namespace

struct ShowerFileReader::Hdf5 {
  h5::ShowerFile shower;
};

ShowerFileReader::~ShowerFileReader() {
  if (hdf5_ == nullptr) return;
  LibraryLock lock;
  hdf5_.reset();
}

absl::StatusOr<std::unique_ptr<ShowerFileReader>> ShowerFileReader::Open(
    const std::string& path, const ShowerFileReaderOptions& options) {
  LibraryLock lock;
  std::unique_ptr<ShowerFileReader> r(new ShowerFileReader());
  r->path_ = path;
  r->hdf5_ = std::make_unique<Hdf5>();
  Hdf5& h = *r->hdf5_;
  ASSIGN_OR_RETURN(h.shower,
                   h5::OpenShowerFile({path, "", {}}, options.limits, options.chunk_cache_bytes));
  r->layout_ = h.shower.layout;
  r->shape_ = h.shower.shape;
  r->to_gev_ = h.shower.to_gev;
  r->energy_gev_ = std::move(h.shower.energy_gev);
  r->theta_rad_ = std::move(h.shower.theta_rad);
  std::string particle = ParticleFromFileName(path);
  if (particle.empty()) particle = h.shower.particle_attribute;
  r->particle_ = particle.empty() ? "Ele" : particle;
  return r;
}

absl::Status ShowerFileReader::ReadRun(int64_t first, int64_t count, float* out) const {
  RETURN_IF_ERROR(h5::ReadRows(path_, hdf5_->shower.cells, first, count, out));
  return h5::CheckCells(hdf5_->shower, first, count, out);
}
absl::StatusOr<ShowerSet> ShowerFileReader::ReadEvents(const std::vector<int64_t>& indices) const {
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t per_event = cells_per_event();
  for (int64_t k = 0; k < n; ++k) {
    if (indices[k] < 0 || indices[k] >= events()) {
      return absl::OutOfRangeError(
          absl::StrCat(path_, ": event index ", indices[k], " is outside [0, ", events(), ")"));
    }
  }
  ShowerSet set;
  set.layout = layout_;
  set.shape = shape_;
  set.particle = particle_;
  set.cells.resize(static_cast<size_t>(n * per_event));
  set.energy_gev.resize(static_cast<size_t>(n));
  if (!theta_rad_.empty()) set.theta_rad.resize(static_cast<size_t>(n));
  // Read in file order (runs of consecutive events), then place each event where it was asked.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return indices[a] < indices[b]; });
  std::vector<float> run;
  {
    LibraryLock lock;
    for (int64_t k = 0; k < n;) {
      int64_t end = k + 1;  // [k, end) of `order` covers events indices[order[k]] + 0, 1, ...
      while (end < n && indices[order[end]] - indices[order[end - 1]] <= 1) ++end;
      const int64_t first = indices[order[k]];
      const int64_t count = indices[order[end - 1]] - first + 1;
      run.resize(static_cast<size_t>(count * per_event));
      RETURN_IF_ERROR(ReadRun(first, count, run.data()));
      for (int64_t j = k; j < end; ++j) {
        const int64_t at = order[j];
        std::memcpy(set.mutable_event(at), run.data() + (indices[at] - first) * per_event,
                    static_cast<size_t>(per_event) * sizeof(float));
      }
      k = end;
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    set.energy_gev[k] = energy_gev_[indices[k]];
    if (!theta_rad_.empty()) set.theta_rad[k] = theta_rad_[indices[k]];
  }
  return set;
}

absl::Status ShowerFileReader::ForEachBlock(
    int64_t block_bytes,
    const std::function<absl::Status(int64_t first, const ShowerSet& block)>& visit) const {
  const int64_t per_event_bytes = cells_per_event() * static_cast<int64_t>(sizeof(float));
  const int64_t block = std::max<int64_t>(1, block_bytes / per_event_bytes);
  std::vector<int64_t> indices;
  for (int64_t first = 0; first < events(); first += block) {
    indices.resize(static_cast<size_t>(std::min(block, events() - first)));
    std::iota(indices.begin(), indices.end(), first);
    ASSIGN_OR_RETURN(ShowerSet set, ReadEvents(indices));
    RETURN_IF_ERROR(visit(first, set));
  }
  return absl::OkStatus();
}

}  // namespace gantry::showers
