// A ShowerSet is a block of calorimeter showers with their generation conditions, held in memory in
// GeV. It is the common currency of workers/: the HDF5 reader and the toy Monte Carlo produce it,
// the trainer consumes it, generation produces it, physics validation compares two of them.
#ifndef GANTRY_SHOWERS_SHOWER_SET_H_
#define GANTRY_SHOWERS_SHOWER_SET_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace gantry::showers {

// The on-disk layouts of reference section C.
enum class Layout {
  kFixedAngle3DGan,     // ECAL (N,25,25,25) GeV, target (N,..) energy at column 1
  kVariableAngle3DGan,  // ECAL (N,51,51,25) GeV, energy (N,), theta (N,) rad
  kCaloChallenge,       // incident_energies (N,1) MeV, showers (N, voxels) MeV
};

struct ShowerSet {
  Layout layout = Layout::kFixedAngle3DGan;
  // Cells per event along (x, y, z); z is the depth (layer) axis. For CaloChallenge:
  // (layers, angular bins, radial bins) with the layer axis first.
  std::array<int64_t, 3> shape{25, 25, 25};
  // Event-major, then x, then y, then z (C order of (N, x, y, z)), in GeV.
  std::vector<float> cells;
  std::vector<float> energy_gev;  // primary energy per event
  std::vector<float> theta_rad;   // incidence angle per event; empty for fixed-angle data
  std::string particle = "Ele";   // Ele, Gamma, Pi0, ChPi

  int64_t events() const { return static_cast<int64_t>(energy_gev.size()); }
  int64_t cells_per_event() const { return shape[0] * shape[1] * shape[2]; }
  const float* event(int64_t i) const { return cells.data() + i * cells_per_event(); }
  float* mutable_event(int64_t i) { return cells.data() + i * cells_per_event(); }
};

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_SHOWER_SET_H_
