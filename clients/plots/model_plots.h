// ModelPlots: the figures a physicist expects of one registered model version, made from its
// stored validation histograms (profiles, sampling fraction against energy, energy-sum and
// hit-count distributions, generated over Monte Carlo) and its validation curve, with safe file
// names and an index.
#ifndef GANTRY_CLIENTS_PLOTS_MODEL_PLOTS_H_
#define GANTRY_CLIENTS_PLOTS_MODEL_PLOTS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "clients/plots/ratio_plot.h"
#include "gantry/v1/catalog.pb.h"

namespace gantry::plots {

// Bounds on what one call reads and draws (histograms come from the server: untrusted).
struct ModelPlotsOptions {
  RenderOptions render;
  int max_histograms = 10000;  // histograms looked at; the rest are ignored with a warning
  int max_energy_bins = 32;    // energy bins plotted; further bins are skipped with a warning
};

// One figure: its file name (fixed vocabulary, [a-z0-9_.] only, e.g.
// "longitudinal_profile_bin02.png") and what it shows, for the index.
struct PlotFile {
  std::string file_name;
  std::string kind;        // e.g. "longitudinal profile"
  std::string energy_bin;  // the energy bin as stored (printable ASCII), empty for across-bin plots
};

// What WriteModelPlots did: the files written (index last) and one line per histogram it skipped
// (at most 100 lines, then one line counting the rest).
struct ModelPlotsReport {
  std::vector<PlotFile> files;
  std::vector<std::string> warnings;
};

// Receives each encoded file (a figure, then the index "index.md"); a failure stops the run.
using PlotSink =
    std::function<absl::Status(const std::string& file_name, const std::string& bytes)>;

// Renders the validation curve (validation_curve.png/.svg: the metrics of model.validation_curve
// against the training step, when at least one point has one of them; at most kMaxCurvePoints
// points are read, unusable values are skipped with a warning) and every known histogram of
// `model`, and hands each file to `sink`. Unknown histogram names
// are ignored; a histogram that cannot be drawn (lengths that disagree, NaN, infinite or negative
// values, too many bins) or repeats one already drawn is skipped with a warning. No name from the
// server becomes part of a file name. FAILED_PRECONDITION when nothing could be drawn; else the
// sink's first error, or OK.
absl::Status WriteModelPlots(const v1::ModelVersion& model, const ModelPlotsOptions& options,
                             const PlotSink& sink, ModelPlotsReport* report);

// "png" or "svg".
std::string FileExtension(ImageFormat format);

}  // namespace gantry::plots

#endif  // GANTRY_CLIENTS_PLOTS_MODEL_PLOTS_H_
