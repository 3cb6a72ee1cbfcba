#include "workers/data/hdf5_io.h"

namespace gantry::data {
absl::StatusOr<ShowerSet> ReadShowerFile(const std::string&) { return absl::UnimplementedError("soon"); }
}
