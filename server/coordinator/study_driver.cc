#include "server/coordinator/study_driver.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "server/coordinator/study_summary.h"
#include "server/requests/field_checks.h"
#include "server/requests/study_requests.h"
#include "storage/study_repository.h"
#include "studies/early_stopping.h"
#include "studies/optimizer.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

studies::Algorithm AlgorithmOf(v1::SearchAlgorithm a) {
  switch (a) {
    case v1::SEARCH_ALGORITHM_GRID:
      return studies::Algorithm::kGrid;
    case v1::SEARCH_ALGORITHM_BAYESIAN:
      return studies::Algorithm::kBayesian;
    case v1::SEARCH_ALGORITHM_EVOLUTIONARY:
      return studies::Algorithm::kEvolutionary;
    default:
      return studies::Algorithm::kRandom;
  }
}

int FoldsOf(const v1::StudySpec& spec) { return std::max(1, spec.folds()); }

std::string MetricOf(const v1::StudySpec& spec) {
  return spec.objective().metric().empty() ? "fom" : spec.objective().metric();
}

// The value the optimiser minimises.
double Minimised(const v1::StudySpec& spec, double value) {
  return spec.objective().maximize() ? -value : value;
}

// The trial's jobs that may still run.
std::vector<std::string> LiveJobs(const v1::Trial& trial) {
  std::vector<std::string> ids;
  for (const v1::FoldResult& f : trial.folds()) {
    if (!storage::IsTerminalJobState(f.job_state())) ids.push_back(f.job_id());
  }
  return ids;
}

}  // namespace

StudyDriver::StudyDriver(storage::StudyRepository& studies, storage::JobRepository& jobs,
                         storage::ModelRepository& models, ModelResolver& resolver,
                         JobSubmitter& submitter, absl::Duration interval)
    : studies_(studies),
      jobs_(jobs),
      models_(models),
      resolver_(resolver),
      submitter_(submitter),
      task_(interval, [this] {
        if (absl::Status s = RunOnce(); !s.ok()) {
          GANTRY_LOG(WARNING) << "study driver: " << s.ToString();
        }
      }) {}

StudyDriver::~StudyDriver() { Stop(); }

absl::Status StudyDriver::RunOnce() {
  absl::MutexLock pass(&pass_mu_);
  ASSIGN_OR_RETURN(std::vector<v1::Study> active, studies_.ListActive());
  absl::Status first;
  for (const v1::Study& study : active) {
    absl::Status s = Advance(study);
    if (!s.ok()) {
      s = absl::Status(s.code(), absl::StrCat("study ", study.id(), ": ", s.message()));
      GANTRY_LOG(WARNING) << s.ToString();
      if (first.ok()) first = s;
    }
  }
  return first;
}

absl::Status StudyDriver::CancelTrialJob(storage::JobRepository& jobs, const std::string& job_id,
                                         const std::string& message) {
  ASSIGN_OR_RETURN(v1::Job job, jobs.Get("", job_id));
  absl::StatusOr<v1::Job> moved;
  if (job.state() == v1::JOB_STATE_QUEUED) {
    moved = jobs.Transition(job_id, {v1::JOB_STATE_QUEUED}, v1::JOB_STATE_CANCELLED,
                            "CancelledByStudy", message);
  } else if (job.state() == v1::JOB_STATE_PLACING || job.state() == v1::JOB_STATE_RUNNING ||
             job.state() == v1::JOB_STATE_RESTARTING) {
    moved = jobs.Transition(
        job_id, {v1::JOB_STATE_PLACING, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING},
        v1::JOB_STATE_CANCELLING, "CancelRequested", message);
  } else {
    return absl::OkStatus();  // already ending or ended
  }
  // A job that moved meanwhile (placed, or ended) is picked up by the next pass.
  if (!moved.ok() && !absl::IsFailedPrecondition(moved.status())) return moved.status();
  return absl::OkStatus();
}

absl::Status StudyDriver::Advance(const v1::Study& study) {
  ASSIGN_OR_RETURN(std::vector<v1::Trial> trials, studies_.ListTrials(study.id()));
  if (study.state() == v1::STUDY_STATE_CANCELLING) return Cancel(study, trials);
  const v1::StudySpec& spec = study.spec();

  // Results of the running trials; early stopping.
  bool changed = false;
  for (const v1::Trial& trial : trials) {
    if (trial.state() != v1::TRIAL_STATE_RUNNING) continue;
    RETURN_IF_ERROR(FollowTrial(study, trial));
    changed = true;
  }
  if (changed) {
    ASSIGN_OR_RETURN(trials, studies_.ListTrials(study.id()));
  }
  if (spec.early_stopping().rule() != v1::EarlyStopping::RULE_UNSPECIFIED) {
    bool stopped_any = false;
    for (const v1::Trial& trial : trials) {
      if (trial.state() != v1::TRIAL_STATE_RUNNING) continue;
      ASSIGN_OR_RETURN(bool stopped, MaybeStopEarly(study, trial, trials));
      stopped_any = stopped_any || stopped;
    }
    if (stopped_any) {
      ASSIGN_OR_RETURN(trials, studies_.ListTrials(study.id()));
    }
  }

  // The best so far, for GetStudy while the study runs.
  const int best = BestTrialIndex(trials, spec.objective().maximize());
  if (best >= 0 && trials[best].number() != study.best_trial()) {
    RETURN_IF_ERROR(studies_.SetBest(study.id(), trials[best].number(), ""));
  }

  // New trials while the budget allows.
  v1::Study summary = study;
  SummarizeStudy(trials, &summary);
  const v1::StudyBudget& budget = spec.budget();
  const bool hours_left =
      budget.max_device_hours() <= 0 || summary.device_hours() < budget.max_device_hours();
  bool exhausted = !hours_left || summary.trials_started() >= budget.max_trials();
  const int room = std::min(budget.max_parallel_trials() - summary.trials_running(),
                            budget.max_trials() - summary.trials_started());
  if (!exhausted && room > 0) {
    RETURN_IF_ERROR(StartTrials(study, trials, room, &exhausted));
    if (!exhausted) return absl::OkStatus();
    ASSIGN_OR_RETURN(trials, studies_.ListTrials(study.id()));
    SummarizeStudy(trials, &summary);
  }
  if (exhausted && summary.trials_running() == 0) return Finish(study, trials);
  if (exhausted && study.reason() != "BudgetSpent") {
    const std::string why =
        hours_left ? absl::StrCat("all ", summary.trials_started(), " trials started")
                   : absl::StrFormat("%.3g of %.3g device-hours used", summary.device_hours(),
                                     budget.max_device_hours());
    // The message only; a failure here changes nothing the next pass needs.
    (void)studies_.Transition(
        study.id(), {v1::STUDY_STATE_RUNNING}, v1::STUDY_STATE_RUNNING, "BudgetSpent",
        absl::StrCat(why, "; waiting for ", summary.trials_running(), " running trials"));
  }
  return absl::OkStatus();
}

absl::Status StudyDriver::FollowTrial(const v1::Study& study, const v1::Trial& trial) {
  const v1::StudySpec& spec = study.spec();
  const int folds = FoldsOf(spec);
  std::map<int, const v1::FoldResult*> by_fold;
  for (const v1::FoldResult& f : trial.folds()) by_fold[f.fold()] = &f;
  // Folds not submitted yet (a crash between storing the trial and submitting, or the tenant's
  // job limit): submit them now.
  for (int k = 0; k < folds; ++k) {
    if (by_fold.count(k)) continue;
    absl::Status s = SubmitFold(study, trial.number(), trial.parameters(), k);
    if (absl::IsResourceExhausted(s) || absl::IsUnavailable(s)) {
      return absl::OkStatus();  // the tenant's job limit or the database: next pass
    }
    if (!s.ok()) {
      for (const std::string& id : LiveJobs(trial)) {
        RETURN_IF_ERROR(CancelTrialJob(jobs_, id, "a sibling fold could not be submitted"));
      }
      return studies_
          .FinishTrial(study.id(), trial.number(), v1::TRIAL_STATE_FAILED,
                       absl::StrCat("fold ", k, " could not be submitted: ", s.message()),
                       std::nullopt, 0)
          .status();
    }
  }
  if (static_cast<int>(by_fold.size()) < folds) return absl::OkStatus();

  const std::string metric = MetricOf(spec);
  std::vector<double> objectives;
  for (const auto& [k, fold] : by_fold) {
    std::string failure;
    v1::TrialState end = v1::TRIAL_STATE_FAILED;
    if (fold->job_state() == v1::JOB_STATE_FAILED) {
      ASSIGN_OR_RETURN(v1::Job job, jobs_.Get("", fold->job_id()));
      failure = absl::StrCat("fold ", k, " (", fold->job_id(), ") failed: ", job.message());
    } else if (fold->job_state() == v1::JOB_STATE_CANCELLED) {
      end = v1::TRIAL_STATE_CANCELLED;
      failure = absl::StrCat("fold ", k, " (", fold->job_id(), ") was cancelled");
    } else if (fold->job_state() == v1::JOB_STATE_SUCCEEDED) {
      if (fold->has_objective()) {
        objectives.push_back(fold->objective());
        continue;
      }
      ASSIGN_OR_RETURN(v1::Job job, jobs_.Get("", fold->job_id()));
      if (job.model_ref().empty()) {
        failure = absl::StrCat("fold ", k, " (", fold->job_id(), ") registered no model");
      } else {
        ASSIGN_OR_RETURN(v1::ModelVersion model, models_.Resolve(study.owner(), job.model_ref()));
        auto it = model.metrics().find(metric);
        if (it == model.metrics().end()) {
          std::vector<std::string> names;
          for (const auto& [name, value] : model.metrics()) names.push_back(name);
          std::sort(names.begin(), names.end());
          failure =
              absl::StrCat("the model of fold ", k, " (", job.model_ref(), ") has no metric \"",
                           metric, "\"; its metrics are: ", absl::StrJoin(names, ", "));
        } else {
          RETURN_IF_ERROR(studies_.SetFoldObjective(fold->job_id(), it->second));
          objectives.push_back(it->second);
          continue;
        }
      }
    } else {
      continue;  // still queued or running
    }
    for (const std::string& id : LiveJobs(trial)) {
      RETURN_IF_ERROR(CancelTrialJob(jobs_, id, absl::StrCat("trial ended: ", failure)));
    }
    return studies_.FinishTrial(study.id(), trial.number(), end, failure, std::nullopt, 0).status();
  }
  if (static_cast<int>(objectives.size()) < folds) return absl::OkStatus();
  const MeanAndSpread m = MeanAndSpreadOf(objectives);
  return studies_
      .FinishTrial(
          study.id(), trial.number(), v1::TRIAL_STATE_SUCCEEDED,
          absl::StrFormat("%s = %.6g ± %.2g over %d folds", metric, m.mean, m.stddev, folds),
          m.mean, m.stddev)
      .status();
}

absl::StatusOr<bool> StudyDriver::MaybeStopEarly(const v1::Study& study, const v1::Trial& trial,
                                                 const std::vector<v1::Trial>& trials) {
  const v1::StudySpec& spec = study.spec();
  const std::string metric = MetricOf(spec);
  // Each trial's curve is its fold-0 job's validation points; the "step" is the point's index
  // (1, 2, ...), so trials searching batch size or epochs stay comparable.
  auto curve = [&](const v1::Trial& t) -> absl::StatusOr<std::vector<studies::IntermediateValue>> {
    std::vector<studies::IntermediateValue> values;
    for (const v1::FoldResult& f : t.folds()) {
      if (f.fold() != 0) continue;
      ASSIGN_OR_RETURN(std::vector<v1::ValidationPoint> points,
                       jobs_.ListValidationPoints(f.job_id()));
      int64_t index = 0;
      for (const v1::ValidationPoint& p : points) {
        ++index;
        auto it = p.metrics().find(metric);
        const double v = it == p.metrics().end() ? std::numeric_limits<double>::infinity()
                                                 : Minimised(spec, it->second);
        values.push_back({index, v});
      }
    }
    return values;
  };
  ASSIGN_OR_RETURN(std::vector<studies::IntermediateValue> mine, curve(trial));
  if (mine.empty()) return false;
  std::vector<std::vector<studies::IntermediateValue>> others;
  for (const v1::Trial& t : trials) {
    if (t.number() == trial.number()) continue;
    ASSIGN_OR_RETURN(std::vector<studies::IntermediateValue> values, curve(t));
    if (!values.empty()) others.push_back(std::move(values));
  }
  studies::EarlyStoppingOptions options;
  options.rule = spec.early_stopping().rule() == v1::EarlyStopping::RULE_ASHA
                     ? studies::EarlyStoppingRule::kAsha
                     : studies::EarlyStoppingRule::kMedian;
  // The library's defaults otherwise: the median of at least 3 other trials, ASHA halving by 3.
  options.min_steps = std::max(1, spec.early_stopping().min_points());
  ASSIGN_OR_RETURN(studies::StopDecision decision, studies::ShouldStopTrial(mine, others, options));
  if (!decision.stop) return false;
  const std::string message = absl::StrCat("stopped early: ", decision.reason);
  for (const std::string& id : LiveJobs(trial)) {
    RETURN_IF_ERROR(CancelTrialJob(jobs_, id, message));
  }
  ASSIGN_OR_RETURN(bool finished,
                   studies_.FinishTrial(study.id(), trial.number(), v1::TRIAL_STATE_STOPPED,
                                        message, std::nullopt, 0));
  return finished;
}

absl::Status StudyDriver::StartTrials(const v1::Study& study, const std::vector<v1::Trial>& trials,
                                      int count, bool* exhausted) {
  const v1::StudySpec& spec = study.spec();
  const studies::SearchSpace space = SearchSpaceOf(spec);
  std::vector<studies::Observation> completed;
  std::vector<studies::Assignment> pending;
  const double folds = FoldsOf(spec);
  for (const v1::Trial& t : trials) {
    if (t.state() == v1::TRIAL_STATE_RUNNING) {
      pending.push_back(AssignmentOf(t.parameters()));
    } else if (t.state() == v1::TRIAL_STATE_SUCCEEDED && t.has_objective()) {
      studies::Observation o;
      o.assignment = AssignmentOf(t.parameters());
      o.objective = Minimised(spec, t.objective());
      if (folds > 1) o.stddev = t.objective_stddev() / std::sqrt(folds);
      completed.push_back(std::move(o));
    } else if (t.state() == v1::TRIAL_STATE_FAILED) {
      // A failed training (diverged, bad values) is worse than any result: steer away from it.
      studies::Observation o;
      o.assignment = AssignmentOf(t.parameters());
      o.objective = std::numeric_limits<double>::infinity();
      completed.push_back(std::move(o));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<studies::Optimizer> optimizer,
                   studies::MakeOptimizer(AlgorithmOf(spec.algorithm())));
  absl::StatusOr<std::vector<studies::Assignment>> suggested =
      optimizer->Suggest(space, completed, pending, count, spec.seed());
  if (absl::IsOutOfRange(suggested.status())) {
    *exhausted = true;  // the grid is spent
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(suggested.status());
  if (suggested->empty()) *exhausted = true;
  int number = static_cast<int>(trials.size());
  for (const studies::Assignment& a : *suggested) {
    ++number;
    const auto parameters = ParametersOf(a);
    absl::Status added = studies_.AddTrial(study.id(), number, parameters);
    // Another server got there first, or the study was cancelled since this pass read it.
    if (absl::IsAlreadyExists(added) || absl::IsFailedPrecondition(added)) return absl::OkStatus();
    RETURN_IF_ERROR(added);
    GANTRY_LOG(INFO) << "study " << study.id() << ": trial " << number << " "
                     << FormatParameters(parameters);
    for (int k = 0; k < FoldsOf(spec); ++k) {
      absl::Status s = SubmitFold(study, number, parameters, k);
      // Left for FollowTrial on the next pass (which also ends the trial on a permanent error).
      if (!s.ok()) break;
    }
  }
  return absl::OkStatus();
}

absl::Status StudyDriver::SubmitFold(
    const v1::Study& study, int number,
    const google::protobuf::Map<std::string, v1::ParameterValue>& parameters, int fold) {
  const v1::StudySpec& spec = study.spec();
  v1::JobSpec job = spec.base_job();
  for (const auto& [name, value] : parameters) {
    RETURN_IF_ERROR(ApplyParameter(name, value, &job));
  }
  const std::string title = spec.display_name().empty() ? study.id() : spec.display_name();
  job.set_display_name(spec.folds() > 1 ? absl::StrCat(title, " trial ", number, " fold ", fold)
                                        : absl::StrCat(title, " trial ", number));
  (*job.mutable_labels())["study"] = study.id();
  (*job.mutable_labels())["study-trial"] = absl::StrCat(number);
  (*job.mutable_labels())["study-fold"] = absl::StrCat(fold);
  if (job.model_name().empty()) job.set_model_name(study.id());
  if (job.hyper_parameters().seed() == 0) {
    // The folds of a trial share a training seed; trials differ.
    job.mutable_hyper_parameters()->set_seed(
        (spec.seed() ^ (uint64_t{0x9e3779b97f4a7c15} * static_cast<uint64_t>(number))) | 1);
  }
  if (spec.folds() > 1) {
    job.mutable_data_split()->set_folds(spec.folds());
    job.mutable_data_split()->set_validation_fold(fold);
    job.mutable_data_split()->set_seed(spec.seed());
  }
  Principal owner;
  owner.tenant = study.owner();
  const std::string request_id = absl::StrCat(study.id(), "/trial-", number, "/fold-", fold);
  ASSIGN_OR_RETURN(v1::Job submitted, submitter_.Submit(owner, std::move(job), request_id));
  return studies_.AddTrialJob(study.id(), number, fold, submitted.id());
}

absl::Status StudyDriver::Finish(const v1::Study& study, const std::vector<v1::Trial>& trials) {
  const v1::StudySpec& spec = study.spec();
  const int best = BestTrialIndex(trials, spec.objective().maximize());
  if (best < 0) {
    return studies_
        .Transition(study.id(), {v1::STUDY_STATE_RUNNING}, v1::STUDY_STATE_FAILED, "NoObjective",
                    absl::StrCat("none of the ", trials.size(), " trials produced ", MetricOf(spec),
                                 "; see ListTrials for why each ended"))
        .status();
  }
  const v1::Trial& trial = trials[best];
  // The trial's fold with the best objective is its model.
  const v1::FoldResult* chosen = nullptr;
  for (const v1::FoldResult& f : trial.folds()) {
    if (!f.has_objective() || f.model_ref().empty()) continue;
    if (chosen == nullptr || (spec.objective().maximize() ? f.objective() > chosen->objective()
                                                          : f.objective() < chosen->objective())) {
      chosen = &f;
    }
  }
  std::string model_ref;
  if (chosen != nullptr) {
    ASSIGN_OR_RETURN(ModelRef ref, ParseModelRef(chosen->model_ref(), "model_ref"));
    // The study id is a valid alias ([a-z][a-z0-9_-]*), unique to the study.
    RETURN_IF_ERROR(models_.SetAlias(study.owner(), ref.name, study.id(), ref.version).status());
    resolver_.ForgetModels();
    model_ref = chosen->model_ref();
  }
  RETURN_IF_ERROR(studies_.SetBest(study.id(), trial.number(), model_ref));
  return studies_
      .Transition(study.id(), {v1::STUDY_STATE_RUNNING}, v1::STUDY_STATE_SUCCEEDED, "Finished",
                  absl::StrFormat("best trial %d: %s = %.6g ± %.2g (%s); model %s@%s",
                                  trial.number(), MetricOf(spec), trial.objective(),
                                  trial.objective_stddev(), FormatParameters(trial.parameters()),
                                  model_ref.substr(0, model_ref.rfind(':')), study.id()))
      .status();
}

absl::Status StudyDriver::Cancel(const v1::Study& study, const std::vector<v1::Trial>& trials) {
  int running = 0;
  for (const v1::Trial& trial : trials) {
    if (trial.state() != v1::TRIAL_STATE_RUNNING) continue;
    const std::vector<std::string> live = LiveJobs(trial);
    for (const std::string& id : live) {
      RETURN_IF_ERROR(
          CancelTrialJob(jobs_, id, absl::StrCat("study ", study.id(), " was cancelled")));
    }
    if (!live.empty()) {
      ++running;
      continue;
    }
    RETURN_IF_ERROR(studies_
                        .FinishTrial(study.id(), trial.number(), v1::TRIAL_STATE_CANCELLED,
                                     "the study was cancelled", std::nullopt, 0)
                        .status());
  }
  if (running > 0) return absl::OkStatus();
  return studies_
      .Transition(study.id(), {v1::STUDY_STATE_CANCELLING}, v1::STUDY_STATE_CANCELLED, "Cancelled",
                  study.message())
      .status();
}

}  // namespace gantry::server
