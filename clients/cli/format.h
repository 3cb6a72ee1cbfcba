// format: turns gantry.v1 values (states, progress, events, sizes, times) into short text for
// people, and parses the names users type for enums.
#ifndef GANTRY_CLIENTS_CLI_FORMAT_H_
#define GANTRY_CLIENTS_CLI_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gantry/v1/catalog.pb.h"
#include "gantry/v1/common.pb.h"
#include "gantry/v1/datasets.pb.h"
#include "gantry/v1/generation.pb.h"
#include "gantry/v1/training.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace gantry::cli {

// "QUEUED", "RUNNING", ...; "-" for unspecified.
std::string JobStateName(v1::JobState state);
// Accepts "queued", "QUEUED", "Queued".
absl::StatusOr<v1::JobState> ParseJobState(const std::string& text);
bool IsTerminal(v1::JobState state);

// "electron", "photon", "pi0", "charged-pion"; "-" for unspecified.
std::string ParticleName(v1::Particle particle);
absl::StatusOr<v1::Particle> ParseParticle(const std::string& text);
std::string DeviceName(v1::DeviceKind device);
absl::StatusOr<v1::DeviceKind> ParseDevice(const std::string& text);
std::string VisibilityName(v1::Visibility visibility);
absl::StatusOr<v1::Visibility> ParseVisibility(const std::string& text);
// "3dgan-fixed-angle", "3dgan-variable-angle", "calochallenge".
std::string LayoutName(v1::DatasetLayout layout);
std::string ModelStatusName(v1::ModelStatus status);
absl::StatusOr<v1::Precision> ParsePrecision(const std::string& text);
// Training: "fp32" (or "float32") and "bf16" (or "bf16-autocast"); "fp32" / "bf16-autocast" out.
absl::StatusOr<v1::TrainingPrecision> ParseTrainingPrecision(const std::string& text);
std::string TrainingPrecisionName(v1::TrainingPrecision precision);
// "available", "unavailable: <reason>" or "not checked: <reason>" (versions registered before the
// check: "not checked: registered before the BF16 check").
std::string FormatBf16(const v1::Bf16Check& check);

// "2026-11-21T22:40:03Z"; "-" for an unset timestamp.
std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp);
// Time since `timestamp` as "42s", "5m", "3h", "2d"; "-" for an unset timestamp.
std::string FormatAge(const google::protobuf::Timestamp& timestamp, absl::Time now);
// "1h02m", "3m20s", "45s".
std::string FormatDuration(double seconds);
// "512 B", "1.5 KiB", "27.0 MiB", "3.20 GiB".
std::string FormatBytes(int64_t bytes);
// "3/10 42%" from epoch progress, "-" when the job has none.
std::string FormatProgressCell(const v1::Progress& progress);
// "[3,25,25,25]".
std::string FormatShape(const google::protobuf::RepeatedField<int64_t>& shape);
// "10-100" (trailing zeros trimmed); "-" when both ends are zero.
std::string FormatRange(const v1::Range& range);
// Sorted "k=v,k2=v2".
std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels);
// "d_loss=0.412 g_loss=1.03": sorted by name, 3 significant digits.
std::string FormatMetrics(const google::protobuf::Map<std::string, double>& metrics);

// The field-standard metrics of a validation (those with an MC-vs-MC floor: auc_features,
// auc_cells, fpd, sep_mean, sep_<group>, the *_ratio keys) as an aligned table: metric, value
// (+- its spread over classifier seeds), the floor, under a title with the events per sample.
// "" when the metrics have none.
std::string FormatFieldMetrics(const google::protobuf::Map<std::string, double>& metrics);
// True for a key FormatFieldMetrics shows or folds in (its _floor and _spread companions, and
// field_events, field_cell_events, nonzero_cells_reference, nonzero_cells_generated).
bool IsFieldMetric(const google::protobuf::Map<std::string, double>& metrics, const std::string& key);

// A validation histogram as an aligned table: one row per bin with its edges (or index), the Monte
// Carlo reference, the GAN value and their ratio, under a title line naming it and its energy bin.
std::string FormatHistogram(const v1::Histogram& histogram);

// A validation curve as an aligned table: one row per point (epoch, step, then fom,
// mre_sampling_fraction as SF_MRE, eprof, pos, ang when any point has it, and separation_power as
// SEP_POWER; "-" where a point lacks the metric). Empty string for an empty curve.
std::string FormatValidationCurve(
    const google::protobuf::RepeatedPtrField<v1::ValidationPoint>& curve);

// One readable line for a WatchJob event, e.g.
// "22:40:03  state QUEUED -> RUNNING (Started: 2 ranks on w1,w2)".
std::string FormatJobEvent(const v1::JobEvent& event);

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_FORMAT_H_
