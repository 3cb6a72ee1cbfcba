// ToyMc: a fast GFlash-parameterised electromagnetic shower simulator (reference section F) that
// fills ShowerSets in the 3DGAN grids (25x25x25 at 90 degrees, 51x51x25 at 60-120 degrees), for
// tests, demos and training without Geant4.
#ifndef GANTRY_SHOWERS_TOY_MC_H_
#define GANTRY_SHOWERS_TOY_MC_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "showers/shower_set.h"

namespace gantry::showers {

struct ToyMcConfig {
  // kFixedAngle3DGan (25x25x25, theta = 90 degrees) or kVariableAngle3DGan (51x51x25).
  Layout layout = Layout::kFixedAngle3DGan;
  int64_t events = 1000;
  // Primary energy drawn uniformly in [min, max] GeV (min == max gives a single energy).
  double energy_min_gev = 10.0;
  double energy_max_gev = 500.0;
  // Incidence angle from the beam axis, drawn uniformly (variable-angle layout only; the
  // fixed-angle layout always uses pi/2 and leaves ShowerSet::theta_rad empty).
  double theta_min_rad = 1.0471975511965976;  // 60 degrees
  double theta_max_rad = 2.0943951023931953;  // 120 degrees
  uint64_t seed = 1;
  std::string particle = "Ele";  // recorded only; the physics is always an electromagnetic shower
  // Distortions for validation tests: all deposited energies are multiplied by energy_scale; the
  // longitudinal profile is stretched in depth by depth_scale (shower maximum and length x
  // depth_scale).
  double energy_scale = 1.0;
  double depth_scale = 1.0;
  // The harder variant (reference section H, constants in toymc:: below): per shower an
  // impact-point jitter, a lateral scale and a start depth; sub-showers that keep their transverse
  // offset over several layers; Landau-tailed cell deposits and a readout threshold. Off by
  // default: then the sample is exactly the standard toy's.
  bool hard = false;
  // Worker threads. The output depends only on the seed, never on the thread count: event i always
  // uses its own RNG stream derived from (seed, i).
  int threads = 1;
};

// Checks ranges (events >= 0, 0 < emin <= emax, angles inside (0, pi), scales > 0, 1 <= threads <=
// 256, layout is a 3DGAN layout). INVALID_ARGUMENT names the bad field.
absl::Status ValidateToyMcConfig(const ToyMcConfig& config);

// Simulates config.events showers. Deterministic by config.seed. RESOURCE_EXHAUSTED when the cells
// would take more than 4 GiB (simulate such samples in slices with SimulateToyMcRange).
absl::StatusOr<ShowerSet> SimulateToyMc(const ToyMcConfig& config);

// Simulates events [first_event, first_event + count) of the sample described by `config`
// (config.events is ignored); identical to the same slice of SimulateToyMc(config). Lets a trainer
// stream a toy sample in batches without holding it all.
absl::StatusOr<ShowerSet> SimulateToyMcRange(const ToyMcConfig& config, int64_t first_event,
                                             int64_t count);

// Parses "toymc:layout=25,events=1000,seed=1,emin=10,emax=500,theta=60:120" (theta in degrees; also
// particle=Ele|Gamma|Pi0|ChPi, escale=, dscale=, hard=0|1, threads=). layout is 25 or 51 (or fixed
// / variable). Missing keys keep the ToyMcConfig defaults. INVALID_ARGUMENT names the bad key or
// value.
absl::StatusOr<ToyMcConfig> ParseToyMcSpec(std::string_view spec);

// The canonical spec string of a config: the keys that change the showers, in a fixed order
// (threads is left out since it never changes the output; theta only for the variable-angle layout;
// escale and dscale only when not 1; hard=1 only when on). ParseToyMcSpec(FormatToyMcSpec(c))
// gives back c up to those fields. Usable as a cache key for the sample.
std::string FormatToyMcSpec(const ToyMcConfig& config);

// Detector constants of the simulated CLIC-like ECAL (reference section F), exposed for tests.
namespace toymc {
inline constexpr double kX0Mm = 3.504;       // tungsten radiation length
inline constexpr double kMoliereMm = 9.327;  // tungsten Moliere radius
inline constexpr double kCriticalGev = 7.97e-3;
inline constexpr double kZ = 74.0;
inline constexpr double kCellMm = 5.1;  // silicon cell pitch in x and y
inline constexpr int kLayers = 25;      // 17 x 2.4 mm W then 8 x 4.8 mm W
inline constexpr int kThinLayers = 17;
inline constexpr double kThinMm = 2.4;
inline constexpr double kThickMm = 4.8;
inline constexpr double kSiliconMm = 0.5;  // active layer thickness (sets F_s)
// Layer pitch used for the shower axis: every layer counts as one cell pitch deep (see
// LayerCentreMm).
inline constexpr double kLayerPitchMm = 5.1;
inline constexpr double kVisibleFraction = 0.02;  // raw sampling fraction

// The hard variant (ToyMcConfig::hard). Per shower:
// the axis is shifted by U(-1/2, 1/2) cell in x and in y (the entry point anywhere in one cell);
inline constexpr double kImpactJitterCells = 0.5;
// the GFlash core and tail radii (and the sub-shower offsets and widths) are multiplied by
// exp(kLateralScaleSigma N(0,1));
inline constexpr double kLateralScaleSigma = 0.15;
// the profile starts at an exponential depth of mean 9/7 X0 (the photon conversion length) along
// the axis; the Gamma profile's T is shortened by that mean so that <start + T> stays GFlash's T;
inline constexpr double kStartDepthMeanX0 = 9.0 / 7.0;
// kSubShowers sub-showers, each with kSubShowerSpotFraction of the spots, centred on a layer drawn
// from the profile and spread evenly over 3-6 consecutive layers at one transverse offset from the
// axis (Gaussian, kSubShowerOffsetMoliere R_M per axis), its spots Gaussian around it
// (kSubShowerWidthMoliere R_M per axis);
inline constexpr int kSubShowers = 3;
inline constexpr double kSubShowerSpotFraction = 0.05;
inline constexpr int kSubShowerMinLayers = 3;
inline constexpr int kSubShowerMaxLayers = 6;
inline constexpr double kSubShowerOffsetMoliere = 0.5;
inline constexpr double kSubShowerWidthMoliere = 0.25;
// each cell's deposit of n spots is multiplied by 1 + kLandauWidth (X - <X>) / sqrt(n), X a
// standard Moyal variate (the Landau approximation; mean 1, a long upper tail);
inline constexpr double kLandauWidth = 0.15;
// and cells whose visible energy is below kReadoutThresholdGev (0.1 MeV, about 2/3 of a minimum-
// ionising particle's 0.15 MeV in 0.5 mm silicon, a third of validation's 3e-4 GeV hit threshold)
// read 0.
inline constexpr double kReadoutThresholdGev = 1e-4;
}  // namespace toymc

// Absorber depth at the centre of layer `layer` (0-based), in radiation lengths along the detector
// normal.
double LayerCentreX0(int layer);
// Depth of the centre of layer `layer` along the detector normal as the shower axis sees it, in mm:
// (layer + 0.5) x 5.1 mm. Every layer counts as one cell pitch deep (true for the thin layers, 2.4
// mm W + 2.7 mm silicon and readout; a simplification for the thick ones), so that the barycentre
// angle in cell units, which is what the 3DGAN angle head measures, equals the true incidence
// angle.
double LayerCentreMm(int layer);

// The incidence angle of one shower on the 3DGAN grid (shape (nx, ny, nz), x-major), measured as
// the 3DGAN reference does (and gantry's discriminator angle head): barycentres in cell units
// (index + 0.5); for every layer with energy, m = (x_layer - x_ref) / sqrt((y_layer - y_ref)^2 + (z
// - z_ref)^2), with the sign of (z - z_ref), and angle pi/2 - atan(m); the result is the mean over
// layers weighted by (z + 0.5). theta < pi/2 means x grows with depth. NaN for an empty shower.
// Written as "mtheta" to variable-angle files and used by physics validation.
double MeasureThetaRad(const float* cells, const std::array<int64_t, 3>& shape);

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_TOY_MC_H_
