// gantry-toymc: writes a toy Monte Carlo sample to an HDF5 file in the 3DGAN layouts, e.g.
//   gantry-toymc toymc:layout=25,events=10000,seed=1 EleEscan_toy_1.h5
// The file trains the Python reference implementations as well as gantry. Flags are parsed here
// only (gantry::ParseFlags).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "base/flags.h"
#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"

ABSL_FLAG(bool, hcal, false, "also write the HCAL dataset");

namespace {

constexpr char kUsage[] =
    "usage: %s <spec> <out.h5> [--hcal]\n"
    "  spec: toymc:layout=25|51,events=N,seed=S,emin=GeV,emax=GeV,theta=deg:deg,"
    "particle=Ele,threads=T\n";

}  // namespace

int main(int argc, char** argv) {
  bool help = false;
  const absl::StatusOr<std::vector<std::string>> args = gantry::ParseFlags(argc, argv, &help);
  if (help || !args.ok() || args->size() != 2) {
    if (!args.ok()) std::fprintf(stderr, "%s\n", std::string(args.status().message()).c_str());
    std::fprintf(stderr, kUsage, argv[0]);
    return help ? 0 : 2;
  }
  const std::string& spec = (*args)[0];
  const std::string& out = (*args)[1];
  absl::StatusOr<gantry::showers::ToyMcConfig> config = gantry::showers::ParseToyMcSpec(spec);
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
  options.write_hcal = absl::GetFlag(FLAGS_hcal);
  absl::Status written = gantry::showers::WriteShowerFile(out, *set, options);
  if (!written.ok()) {
    std::fprintf(stderr, "%s\n", std::string(written.message()).c_str());
    return 1;
  }
  std::printf("%s: %lld showers (%s)\n", out.c_str(), static_cast<long long>(set->events()),
              gantry::showers::FormatToyMcSpec(*config).c_str());
  return 0;
}
