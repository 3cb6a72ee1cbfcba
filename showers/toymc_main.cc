// gantry-toymc: writes a toy Monte Carlo sample to an HDF5 file in the 3DGAN layouts, e.g.
//   gantry-toymc toymc:layout=25,events=10000,seed=1 EleEscan_toy_1.h5
// The file trains the Python reference implementations as well as gantry.
#include <cstdio>
#include <string>

#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr,
                 "usage: %s <spec> <out.h5> [--hcal]\n"
                 "  spec: toymc:layout=25|51,events=N,seed=S,emin=GeV,emax=GeV,theta=deg:deg,"
                 "particle=Ele,threads=T\n",
                 argv[0]);
    return 2;
  }
  absl::StatusOr<gantry::showers::ToyMcConfig> config = gantry::showers::ParseToyMcSpec(argv[1]);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<gantry::showers::ShowerSet> set = gantry::showers::SimulateToyMc(*config);
  if (!set.ok()) {
    std::fprintf(stderr, "%s\n", std::string(set.status().message()).c_str());
    return 1;
  }
  gantry::showers::WriteOptions options;
  options.write_hcal = argc == 4 && std::string(argv[3]) == "--hcal";
  absl::Status written = gantry::showers::WriteShowerFile(argv[2], *set, options);
  if (!written.ok()) {
    std::fprintf(stderr, "%s\n", std::string(written.message()).c_str());
    return 1;
  }
  std::printf("%s: %lld showers (%s)\n", argv[2], static_cast<long long>(set->events()),
              gantry::showers::FormatToyMcSpec(*config).c_str());
  return 0;
}
