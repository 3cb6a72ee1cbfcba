// `gantry studies ...`: create, list, get, cancel and watch hyper-parameter studies, and list their
// trials.
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "clients/cli/command.h"
#include "clients/cli/command_helpers.h"
#include "clients/cli/format.h"
#include "clients/cli/json_output.h"
#include "clients/cli/table.h"
#include "gantry/v1/studies.grpc.pb.h"

namespace gantry::cli {
namespace {

using v1::StudyService;

std::string StudyStateName(v1::StudyState state) {
  std::string name = v1::StudyState_Name(state);
  return name.substr(std::string("STUDY_STATE_").size());
}

std::string TrialStateName(v1::TrialState state) {
  std::string name = v1::TrialState_Name(state);
  return name.substr(std::string("TRIAL_STATE_").size());
}

bool IsTerminalStudy(v1::StudyState s) {
  return s == v1::STUDY_STATE_SUCCEEDED || s == v1::STUDY_STATE_FAILED ||
         s == v1::STUDY_STATE_CANCELLED;
}

std::string FormatValue(const v1::ParameterValue& v) {
  switch (v.value_case()) {
    case v1::ParameterValue::kNumber:
      return absl::StrFormat("%.4g", v.number());
    case v1::ParameterValue::kInteger:
      return absl::StrCat(v.integer());
    case v1::ParameterValue::kCategory:
      return v.category();
    default:
      return "?";
  }
}

std::string FormatParameters(const v1::Trial& trial) {
  std::map<std::string, std::string> sorted;
  for (const auto& [name, value] : trial.parameters()) {
    // "hyper_parameters.learning_rate" -> "learning_rate": the field is unique enough to read.
    const size_t dot = name.rfind('.');
    sorted[dot == std::string::npos ? name : name.substr(dot + 1)] = FormatValue(value);
  }
  return absl::StrJoin(sorted, " ", absl::PairFormatter("="));
}

std::string FormatObjective(const v1::Trial& trial) {
  if (!trial.has_objective()) return "-";
  if (trial.folds_size() > 1) {
    return absl::StrFormat("%.4g ± %.2g", trial.objective(), trial.objective_stddev());
  }
  return absl::StrFormat("%.4g", trial.objective());
}

std::string FormatBest(const v1::Study& study) {
  if (study.best_trial() == 0) return "-";
  std::string best = absl::StrCat("#", study.best_trial());
  if (study.has_best_objective())
    absl::StrAppend(&best, absl::StrFormat(" %.4g", study.best_objective()));
  return best;
}

void PrintStudiesTable(const std::vector<const v1::Study*>& studies, std::ostream& out) {
  Table table({"ID", "NAME", "STATE", "TRIALS", "RUNNING", "BEST", "DEVICE-H", "AGE"});
  const absl::Time now = absl::Now();
  for (const v1::Study* s : studies) {
    table.AddRow({s->id(), s->spec().display_name(), StudyStateName(s->state()),
                  absl::StrCat(s->trials_finished(), "/", s->spec().budget().max_trials()),
                  absl::StrCat(s->trials_running()), FormatBest(*s),
                  absl::StrFormat("%.3f", s->device_hours()), FormatAge(s->created_at(), now)});
  }
  table.Render(out);
}

void PrintTrialsTable(const std::vector<v1::Trial>& trials, const std::string& metric,
                      std::ostream& out) {
  Table table({"#", "STATE", absl::AsciiStrToUpper(metric), "FOLDS", "DEVICE-H", "PARAMETERS"});
  for (const v1::Trial& t : trials) {
    int done = 0;
    for (const v1::FoldResult& f : t.folds()) done += f.has_objective();
    table.AddRow({absl::StrCat(t.number()), TrialStateName(t.state()), FormatObjective(t),
                  absl::StrCat(done, "/", t.folds_size()),
                  absl::StrFormat("%.4f", t.device_hours()), FormatParameters(t)});
  }
  table.Render(out);
}

absl::StatusOr<v1::Study> FetchStudy(CommandContext& context, const std::string& id) {
  v1::GetStudyRequest request;
  request.set_study_id(id);
  v1::Study study;
  RETURN_IF_ERROR(CallUnary(context, &StudyService::Stub::GetStudy, request, &study));
  return study;
}

absl::Status Create(CommandContext& context) {
  v1::StudySpec spec;
  const std::optional<std::string> given = context.args.Get("spec");
  if (!given.has_value()) {
    return UsageError("--spec is required: a StudySpec JSON file (see docs/STUDIES.md)");
  }
  const std::string& path = *given;
  absl::StatusOr<std::string> contents = ReadWholeFile(path);
  if (!contents.ok()) return UsageError(absl::StrCat("--spec: ", contents.status().message()));
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  if (auto s = google::protobuf::util::JsonStringToMessage(*contents, &spec, options); !s.ok()) {
    return UsageError(
        absl::StrCat("--spec ", path, ": not a valid StudySpec JSON: ", std::string(s.message())));
  }
  if (auto name = context.args.Get("name")) spec.set_display_name(*name);
  if (context.args.Has("max-trials")) {
    ASSIGN_OR_RETURN(int n, IntFlagOr(context.args, "max-trials", 0));
    spec.mutable_budget()->set_max_trials(n);
  }
  if (context.args.Has("parallel")) {
    ASSIGN_OR_RETURN(int n, IntFlagOr(context.args, "parallel", 0));
    spec.mutable_budget()->set_max_parallel_trials(n);
  }
  if (context.args.Has("folds")) {
    ASSIGN_OR_RETURN(int n, IntFlagOr(context.args, "folds", 0));
    spec.set_folds(n);
  }
  v1::CreateStudyRequest request;
  *request.mutable_spec() = spec;
  request.set_request_id(context.args.Get("request-id").value_or(""));
  v1::Study study;
  RETURN_IF_ERROR(CallUnary(context, &StudyService::Stub::CreateStudy, request, &study));
  if (context.json) return PrintJson(context.out, study);
  PrintStudiesTable({&study}, context.out);
  return absl::OkStatus();
}

absl::Status List(CommandContext& context) {
  v1::ListStudiesRequest request;
  ASSIGN_OR_RETURN(int limit, IntFlagOr(context.args, "limit", 50));
  if (limit < 1 || limit > 1000) return UsageError("--limit: must be in 1..1000");
  request.mutable_page()->set_page_size(limit);
  v1::ListStudiesResponse response;
  RETURN_IF_ERROR(CallUnary(context, &StudyService::Stub::ListStudies, request, &response));
  if (context.json) return PrintJsonArray(context.out, response.studies());
  if (response.studies().empty()) {
    context.out << "No studies.\n";
    return absl::OkStatus();
  }
  std::vector<const v1::Study*> pointers;
  for (const v1::Study& s : response.studies()) pointers.push_back(&s);
  PrintStudiesTable(pointers, context.out);
  return absl::OkStatus();
}

absl::Status Get(CommandContext& context) {
  ASSIGN_OR_RETURN(v1::Study study, FetchStudy(context, context.args.Positional(0)));
  if (context.json) return PrintJson(context.out, study);
  const v1::StudySpec& spec = study.spec();
  std::vector<std::string> params;
  for (const v1::SearchParameter& p : spec.parameters()) {
    std::string kind = v1::SearchParameter::Kind_Name(p.kind()).substr(5);
    params.push_back(p.kind() == v1::SearchParameter::KIND_CATEGORICAL
                         ? absl::StrCat(p.name(), " in {", absl::StrJoin(p.choices(), ","), "}")
                         : absl::StrCat(p.name(), " ", absl::AsciiStrToLower(kind), " [", p.min(),
                                        ", ", p.max(), "]"));
  }
  std::vector<std::pair<std::string, std::string>> rows = {
      {"ID", study.id()},
      {"Name", spec.display_name()},
      {"Owner", study.owner()},
      {"State", StudyStateName(study.state())},
      {"Reason", study.reason()},
      {"Message", study.message()},
      {"Created", FormatTimestamp(study.created_at())},
      {"Finished", FormatTimestamp(study.finished_at())},
      {"Algorithm", v1::SearchAlgorithm_Name(spec.algorithm()).substr(17)},
      {"Objective", absl::StrCat(spec.objective().maximize() ? "maximise " : "minimise ",
                                 spec.objective().metric())},
      {"Parameters", absl::StrJoin(params, "; ")},
      {"Folds", spec.folds() > 1 ? absl::StrCat(spec.folds()) : "no cross-validation"},
      {"Budget",
       absl::StrCat(spec.budget().max_trials(), " trials, ", spec.budget().max_parallel_trials(),
                    " in parallel",
                    spec.budget().max_device_hours() > 0
                        ? absl::StrCat(", ", spec.budget().max_device_hours(), " device-hours")
                        : "")},
      {"Trials", absl::StrCat(study.trials_started(), " started, ", study.trials_running(),
                              " running, ", study.trials_finished(), " finished")},
      {"Device-hours", absl::StrFormat("%.4f", study.device_hours())},
      {"Best trial", FormatBest(study)},
      {"Best model", study.best_model_ref().empty()
                         ? ""
                         : absl::StrCat(study.best_model_ref(), " (alias ", study.id(), ")")},
  };
  for (auto& [key, value] : rows) {
    context.out << key << ":" << std::string(14 - key.size(), ' ')
                << (value.empty() ? "-" : EscapeControlText(value)) << '\n';
  }
  return absl::OkStatus();
}

absl::Status Trials(CommandContext& context) {
  v1::ListTrialsRequest request;
  request.set_study_id(context.args.Positional(0));
  v1::ListTrialsResponse response;
  RETURN_IF_ERROR(CallUnary(context, &StudyService::Stub::ListTrials, request, &response));
  if (context.json) return PrintJsonArray(context.out, response.trials());
  if (response.trials().empty()) {
    context.out << "No trials yet.\n";
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(v1::Study study, FetchStudy(context, request.study_id()));
  std::vector<v1::Trial> trials(response.trials().begin(), response.trials().end());
  PrintTrialsTable(trials, study.spec().objective().metric(), context.out);
  if (context.args.Has("folds")) {
    context.out << '\n';
    Table folds({"TRIAL", "FOLD", "JOB", "JOB STATE", "OBJECTIVE", "MODEL"});
    for (const v1::Trial& t : trials) {
      for (const v1::FoldResult& f : t.folds()) {
        folds.AddRow({absl::StrCat(t.number()), absl::StrCat(f.fold()), f.job_id(),
                      JobStateName(f.job_state()),
                      f.has_objective() ? absl::StrFormat("%.4g", f.objective()) : "-",
                      f.model_ref().empty() ? "-" : f.model_ref()});
      }
    }
    folds.Render(context.out);
  }
  return absl::OkStatus();
}

absl::Status Cancel(CommandContext& context) {
  v1::CancelStudyRequest request;
  request.set_study_id(context.args.Positional(0));
  request.set_reason(context.args.Get("reason").value_or(""));
  v1::Study study;
  RETURN_IF_ERROR(CallUnary(context, &StudyService::Stub::CancelStudy, request, &study));
  if (context.json) return PrintJson(context.out, study);
  PrintStudiesTable({&study}, context.out);
  return absl::OkStatus();
}

// One progress line: a bar of finished trials, the running ones and the best so far.
std::string ProgressLine(const v1::Study& study) {
  const int total = std::max(1, study.spec().budget().max_trials());
  constexpr int kWidth = 20;
  const int filled = std::min(kWidth, kWidth * study.trials_finished() / total);
  return absl::StrFormat("[%s%s] %d/%d trials done, %d running, best %s, %.3f device-h, %s",
                         std::string(filled, '#'), std::string(kWidth - filled, '.'),
                         study.trials_finished(), total, study.trials_running(), FormatBest(study),
                         study.device_hours(), StudyStateName(study.state()));
}

absl::Status Watch(CommandContext& context) {
  ASSIGN_OR_RETURN(auto stub, NewStub<StudyService>(context));
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  v1::WatchStudyRequest request;
  request.set_study_id(context.args.Positional(0));
  auto rpc = connection->NewLongContext(std::nullopt);
  auto reader = stub->WatchStudy(rpc.get(), request);
  v1::StudyUpdate update;
  std::map<int, v1::TrialState> seen;
  v1::Study last;
  while (reader->Read(&update)) {
    last = update.study();
    if (context.json) {
      RETURN_IF_ERROR(PrintJson(context.out, update));
      context.out.flush();
      continue;
    }
    // A line per trial that started or ended, then the progress line.
    for (const v1::Trial& t : update.trials()) {
      auto it = seen.find(t.number());
      if (it != seen.end() && it->second == t.state()) continue;
      seen[t.number()] = t.state();
      context.out << "trial " << t.number() << " " << TrialStateName(t.state());
      if (t.has_objective()) context.out << " " << FormatObjective(t);
      context.out << "  " << FormatParameters(t);
      if (!t.message().empty() && t.state() != v1::TRIAL_STATE_RUNNING) {
        context.out << "  (" << t.message() << ")";
      }
      context.out << '\n';
    }
    context.out << ProgressLine(update.study()) << '\n';
    context.out.flush();
  }
  RETURN_IF_ERROR(FromGrpc(reader->Finish(), connection->config().server));
  if (!context.json) {
    context.out << "study " << last.id() << " " << StudyStateName(last.state()) << ": "
                << last.message() << '\n';
  }
  if (last.state() != v1::STUDY_STATE_SUCCEEDED) context.exit_code = 1;
  return absl::OkStatus();
}

}  // namespace

void AddStudyCommands(std::vector<Command>* commands) {
  commands->push_back(
      {{"studies", "create"},
       "Create a hyper-parameter study (stored as RUNNING; the server runs its trials)",
       "Reads a StudySpec (protobuf JSON) from --spec: the base job, the search parameters by\n"
       "JobSpec field path, the objective, the algorithm, the budget, folds and early stopping,\n"
       "e.g. {\"baseJob\": {...}, \"parameters\": [{\"name\": \"hyper_parameters.learning_rate\",\n"
       "\"kind\": \"KIND_LOG_CONTINUOUS\", \"min\": 1e-4, \"max\": 1e-2}], \"algorithm\":\n"
       "\"SEARCH_ALGORITHM_BAYESIAN\", \"budget\": {\"maxTrials\": 20, \"maxParallelTrials\": 2},\n"
       "\"folds\": 3}. The flags override the file. See docs/STUDIES.md.",
       {},
       {{"spec", "FILE", "StudySpec JSON (required)"},
        {"name", "TEXT", "display name"},
        {"max-trials", "N", "budget.max_trials"},
        {"parallel", "N", "budget.max_parallel_trials"},
        {"folds", "K", "K-fold cross-validation (0 = off, 2..20)"},
        {"request-id", "ID", "idempotency key: a retry returns the same study"}},
       Create});
  commands->push_back({{"studies", "list"},
                       "List studies (newest first)",
                       "",
                       {},
                       {{"limit", "N", "at most N studies (default 50)"}},
                       List});
  commands->push_back(
      {{"studies", "get"}, "Show one study", "", {{"STUDY_ID", "study-<uuid>"}}, {}, Get});
  commands->push_back({{"studies", "trials"},
                       "List a study's trials: parameters, objective (mean ± spread), cost",
                       "",
                       {{"STUDY_ID", "study-<uuid>"}},
                       {{"folds", "", "also list every fold's job, state, objective and model"}},
                       Trials});
  commands->push_back(
      {{"studies", "watch"},
       "Follow a study until it ends; exit 0 only if it SUCCEEDED",
       "Prints a line when a trial starts or ends and a progress line (finished trials, running\n"
       "ones, best so far, device-hours) at every change. With --json, one StudyUpdate per line.",
       {{"STUDY_ID", "study-<uuid>"}},
       {},
       Watch});
  commands->push_back({{"studies", "cancel"},
                       "Cancel a study: no new trials, every running trial job cancelled",
                       "",
                       {{"STUDY_ID", "study-<uuid>"}},
                       {{"reason", "TEXT", "recorded in the study's message"}},
                       Cancel});
}

}  // namespace gantry::cli
