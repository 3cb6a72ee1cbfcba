// RankInput: the data stage of a rank, from the dataset file it materialised to the batches it
// trains on. It checks that the file fits the model, splits the hold-out (a fraction or k folds,
// minus a left-out energy band), fits the model's conditions and shower template to the training
// events, and streams those events through the prefetching batch source. Every rank does the same
// and gets the same split and fit; rank 0 of a job with validation also reads the held-out events.
// Runs in-process on a file: no server, no process group.
#ifndef GANTRY_WORKERS_RUNNER_RANK_INPUT_H_
#define GANTRY_WORKERS_RUNNER_RANK_INPUT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/worker.pb.h"
#include "jobspec/model_config.h"
#include "showers/shower_file_reader.h"
#include "showers/shower_set.h"
#include "workers/gan/batch_source.h"
#include "workers/runner/dataset_source.h"
#include "workers/runner/holdout_split.h"
#include "workers/runner/rank_log.h"
#include "workers/runner/rank_plan.h"

namespace gantry::runner {

// What a training rank trains on.
struct TrainingInput {
  // plan.model with its conditions fitted to the training events (fit_conditions_to_data).
  gan::ModelConfig model;
  // ModelConfig::generator_template: the template fitted to the training events that a fresh
  // generator starts from; empty when resuming (the checkpoint has it) or without a template.
  std::vector<double> shower_template;
  std::unique_ptr<gan::BatchSource> batches;
};

class RankInput {
 public:

  // `plan` must outlive the stage.
  RankInput(const RankPlan& plan, RankLog log);

  // The "dataset ... materialised" log line: events, shape, particle, hash, where it came from.
  void Describe(const MaterializedDataset& dataset, const showers::ShowerFileReader& reader,
                const std::string& particle, double seconds) const;
  // INVALID_ARGUMENT unless the file's layout and grid are the model's.
  absl::Status CheckFitsModel(const showers::ShowerFileReader& reader) const;
  // The dataset's hash, particle and energy and angle ranges into the job's result.
  static void Record(const MaterializedDataset& dataset, const std::string& particle,
                     gantry::v1::JobResult* result);

  // The hold-out split (identical on every rank), minus spec.validation.leave_out's band. On rank
  // 0 of a job with validation, the held-out events go to *holdout (labelled `particle`).
  absl::StatusOr<HoldoutSplit> Split(const showers::ShowerFileReader& reader,
                                     const std::string& particle,
                                     std::optional<showers::ShowerSet>* holdout) const;

  // Split, then the fit and the input pipeline: the training events of `reader` (its file at
  // `local_path`) read ahead by the plan's loader threads into pinned host memory when
  // `pin_memory`. The lineage (fitted conditions, pipeline settings) goes into
  // `hyper_parameters`.
  absl::StatusOr<TrainingInput> Prepare(
      std::shared_ptr<const showers::ShowerFileReader> reader, const std::string& particle,
      const std::string& local_path, bool pin_memory,
      google::protobuf::Map<std::string, std::string>* hyper_parameters,
      std::optional<showers::ShowerSet>* holdout) const;

 private:
  // spec.validation.leave_out: drops the band's events from `train`. INVALID_ARGUMENT when the
  // band does not lie inside the dataset's energies or holds every training event.
  absl::Status LeaveOutBand(const showers::ShowerFileReader& reader,
                            std::vector<int64_t>* train) const;

  const RankPlan& plan_;
  const int rank_;
  const RankLog log_;
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RANK_INPUT_H_
