// `gantry jobs ...`: submit, list, get, cancel, watch and read the logs of training jobs.
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "clients/cli/command.h"
#include "clients/cli/command_helpers.h"
#include "clients/cli/format.h"
#include "clients/cli/job_spec_builder.h"
#include "clients/cli/json_output.h"
#include "clients/cli/table.h"
#include "gantry/v1/datasets.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"

namespace gantry::cli {
namespace {

using v1::TrainingService;

// Reconnection attempts of `jobs watch` after UNAVAILABLE or CANCELLED (about two minutes in all).
constexpr int kWatchRetries = 15;

void PrintJobsTable(const std::vector<const v1::Job*>& jobs, std::ostream& out) {
  Table table({"ID", "NAME", "STATE", "REASON", "AGE", "PROGRESS", "OWNER"});
  const absl::Time now = absl::Now();
  for (const v1::Job* job : jobs) {
    table.AddRow({job->id(), job->spec().display_name(), JobStateName(job->state()), job->reason(),
                  FormatAge(job->created_at(), now), FormatProgressCell(job->progress()),
                  job->owner()});
  }
  table.Render(out);
}

absl::Status PrintJob(CommandContext& context, const v1::Job& job) {
  if (context.json) return PrintJson(context.out, job);
  PrintJobsTable({&job}, context.out);
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> FetchJob(CommandContext& context, const std::string& id) {
  v1::GetJobRequest request;
  request.set_job_id(id);
  v1::Job job;
  RETURN_IF_ERROR(CallUnary(context, &TrainingService::Stub::GetJob, request, &job));
  return job;
}

// How a followed job ended.
struct JobEnd {
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  std::string reason;
  std::string message;
};

// Follows job `id`'s events after sequence `after` until the server closes the stream (the job
// ended), handing each to `on_event`. A dropped stream (UNAVAILABLE, or CANCELLED from the
// transport) is resumed after the last event seen, for about two minutes, once a stream worked.
// Returns how the job ended (asked with GetJob when the stream showed no final state).
absl::StatusOr<JobEnd> FollowJob(CommandContext& context, const std::string& id, int64_t after,
                                 const std::function<absl::Status(const v1::JobEvent&)>& on_event) {
  ASSIGN_OR_RETURN(auto stub, NewStub<TrainingService>(context));
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  JobEnd end;
  int64_t last_sequence = after;
  int retries = 0;
  bool streamed = false;  // only a watch that worked once retries; a wrong address fails at once
  while (true) {
    v1::WatchJobRequest request;
    request.set_job_id(id);
    request.set_after_sequence(last_sequence);
    // No deadline: a watch follows the job for as long as it runs.
    auto rpc = connection->NewLongContext(std::nullopt);
    auto reader = stub->WatchJob(rpc.get(), request);
    v1::JobEvent event;
    while (reader->Read(&event)) {
      RETURN_IF_ERROR(on_event(event));
      last_sequence = event.sequence();
      retries = 0;
      streamed = true;
      if (event.has_state_change()) {
        end.state = event.state_change().to();
        end.reason = event.state_change().reason();
        end.message = event.state_change().message();
      }
    }
    absl::Status status = FromGrpc(reader->Finish(), connection->config().server);
    if (status.ok()) break;
    // A restarting server or a network blip must not end a watch of a long training: resume
    // after the last event seen, so nothing is printed twice or lost.
    // The CLI never cancels its own watch, so CANCELLED here comes from the transport (a call that
    // raced with the old server's shutdown) and is retried like UNAVAILABLE.
    const bool transient = status.code() == absl::StatusCode::kUnavailable ||
                           status.code() == absl::StatusCode::kCancelled;
    if (!streamed || !transient || retries >= kWatchRetries) return status;
    const absl::Duration delay =
        std::min(absl::Seconds(1) * (1 << std::min(retries, 4)), absl::Seconds(10));
    ++retries;
    context.err << "gantry: watch interrupted (" << EscapeControlText(status.message())
                << "); reconnecting in " << absl::FormatDuration(delay) << " from event #"
                << last_sequence << '\n';
    absl::SleepFor(delay);
  }
  if (!IsTerminal(end.state)) {
    // The stream closed without a final state in view (e.g. watched from a late sequence): ask.
    ASSIGN_OR_RETURN(v1::Job job, FetchJob(context, id));
    end.state = job.state();
    end.reason = job.reason();
    end.message = job.message();
  }
  return end;
}

// Exit code 1 (with a line on stderr) unless the job SUCCEEDED.
void ReportEnd(CommandContext& context, const std::string& id, const JobEnd& end) {
  if (end.state == v1::JOB_STATE_SUCCEEDED) return;
  context.err << "gantry: job " << id << " ended " << JobStateName(end.state);
  if (!end.reason.empty()) {
    context.err << " (" << EscapeControlText(end.reason) << ": " << EscapeControlText(end.message)
                << ")";
  }
  context.err << '\n';
  context.exit_code = 1;
}

// `jobs submit --dry-run`: the spec passed every check; what it would take on each pool.
absl::Status PrintEstimates(CommandContext& context, const v1::Job& job) {
  if (context.json) return PrintJson(context.out, job);
  context.out << "valid: nothing was submitted. Estimates, cheapest first:\n";
  Table table({"POOL", "DEVICE", "USD/DEVICE-H", "DURATION", "DEVICE-H", "COST USD"});
  for (const v1::CostEstimate& e : job.estimates()) {
    const bool known = e.samples_per_second_per_rank() > 0;
    table.AddRow({e.pool().empty() ? "(any worker)" : e.pool(), DeviceName(e.device()),
                  absl::StrFormat("%.4g", e.price_per_device_hour()),
                  known ? FormatDuration(e.duration_seconds()) : "?",
                  known ? absl::StrFormat("%.4f", e.device_hours()) : "?",
                  known ? absl::StrFormat("%.4f", e.cost_usd()) : "?"});
  }
  table.Render(context.out);
  for (const v1::CostEstimate& e : job.estimates()) {
    context.out << (e.pool().empty() ? "(any worker)" : e.pool()) << ": " << e.samples()
                << " samples; " << e.basis() << '\n';
  }
  return absl::OkStatus();
}

absl::Status Submit(CommandContext& context) {
  ASSIGN_OR_RETURN(v1::JobSpec spec, BuildJobSpec(context.args, ReadWholeFile));
  // The API takes "ds-<id>"; let people name their uploaded dataset instead.
  const std::string& dataset = spec.dataset();
  if (!dataset.empty() && !absl::StartsWith(dataset, "ds-") &&
      !absl::StartsWith(dataset, "toymc:") && !absl::StartsWith(dataset, "file://")) {
    v1::GetDatasetRequest lookup;
    lookup.set_dataset_id(dataset);
    v1::Dataset found;
    absl::Status status = CallUnary(context, &v1::DatasetService::Stub::GetDataset, lookup, &found);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("--dataset ", dataset, ": ", status.message()));
    }
    spec.set_dataset(found.id());
  }
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  request.set_request_id(context.args.Get("request-id").value_or(""));
  request.set_validate_only(context.args.Has("dry-run"));
  v1::Job job;
  RETURN_IF_ERROR(CallUnary(context, &TrainingService::Stub::SubmitJob, request, &job));
  if (request.validate_only()) return PrintEstimates(context, job);
  if (!context.args.Has("wait")) return PrintJob(context, job);
  // --wait: progress on stderr, the job as it ended on stdout, exit 1 unless it SUCCEEDED.
  context.err << "gantry: submitted " << job.id() << "; waiting for it to end\n";
  ASSIGN_OR_RETURN(const JobEnd end,
                   FollowJob(context, job.id(), 0, [&](const v1::JobEvent& event) {
                     if (!event.has_log()) {
                       context.err << EscapeControlText(FormatJobEvent(event)) << '\n';
                       context.err.flush();
                     }
                     return absl::OkStatus();
                   }));
  ASSIGN_OR_RETURN(const v1::Job ended, FetchJob(context, job.id()));
  RETURN_IF_ERROR(PrintJob(context, ended));
  ReportEnd(context, job.id(), end);
  return absl::OkStatus();
}

absl::Status List(CommandContext& context) {
  v1::ListJobsRequest request;
  for (const std::string& text : context.args.GetAll("state")) {
    absl::StatusOr<v1::JobState> state = ParseJobState(text);
    if (!state.ok()) return UsageError(absl::StrCat("--state: ", state.status().message()));
    request.add_states(*state);
  }
  request.set_owner(context.args.Get("owner").value_or(""));
  RETURN_IF_ERROR(AddKeyValues(context.args, "label", request.mutable_label_selector()));
  ASSIGN_OR_RETURN(int limit, IntFlagOr(context.args, "limit", 50));
  if (limit < 0) return UsageError("--limit: must be >= 0 (0 = all)");

  std::vector<v1::Job> jobs;
  std::string page_token;
  do {
    request.mutable_page()->set_page_token(page_token);
    int remaining = limit == 0 ? 1000 : limit - static_cast<int>(jobs.size());
    request.mutable_page()->set_page_size(std::min(remaining, 1000));
    v1::ListJobsResponse response;
    RETURN_IF_ERROR(CallUnary(context, &TrainingService::Stub::ListJobs, request, &response));
    for (auto& job : *response.mutable_jobs()) jobs.push_back(std::move(job));
    page_token = response.next_page_token();
  } while (!page_token.empty() && (limit == 0 || static_cast<int>(jobs.size()) < limit));
  if (limit > 0 && static_cast<int>(jobs.size()) > limit) jobs.resize(limit);

  std::vector<const v1::Job*> pointers;
  for (const auto& job : jobs) pointers.push_back(&job);
  if (context.json) {
    return PrintJsonArray(context.out, std::vector<const google::protobuf::Message*>(
                                           pointers.begin(), pointers.end()));
  }
  if (jobs.empty()) {
    context.out << "No jobs.\n";
    return absl::OkStatus();
  }
  PrintJobsTable(pointers, context.out);
  if (!page_token.empty()) {
    context.err << "(more jobs: raise --limit, or --limit 0 for all)\n";
  }
  return absl::OkStatus();
}

absl::Status Get(CommandContext& context) {
  ASSIGN_OR_RETURN(v1::Job job, FetchJob(context, context.args.Positional(0)));
  if (context.json) return PrintJson(context.out, job);
  const v1::JobSpec& spec = job.spec();
  std::vector<std::pair<std::string, std::string>> rows = {
      {"ID", job.id()},
      {"Name", spec.display_name()},
      {"Owner", job.owner()},
      {"State", JobStateName(job.state())},
      {"Reason", job.reason()},
      {"Message", job.message()},
      {"Created", FormatTimestamp(job.created_at())},
      {"Started", FormatTimestamp(job.started_at())},
      {"Finished", FormatTimestamp(job.finished_at())},
      {"Preset", spec.model_preset()},
      {"Dataset", spec.dataset()},
      {"World size",
       absl::StrCat(spec.world_size(), " x ", DeviceName(spec.resources_per_rank().device()))},
      {"Epochs", absl::StrCat(spec.hyper_parameters().epochs())},
      {"Batch per rank", absl::StrCat(spec.hyper_parameters().batch_per_rank())},
      {"Precision", TrainingPrecisionName(spec.hyper_parameters().precision())},
      {"Learning rate", spec.hyper_parameters().learning_rate() > 0
                            ? absl::StrCat(spec.hyper_parameters().learning_rate())
                            : "preset default"},
      {"Priority", absl::StrCat(spec.priority())},
      {"Labels", FormatLabels(spec.labels())},
      {"Worker selector", FormatLabels(spec.worker_selector())},
      {"Pool", spec.pool().empty()
                   ? (spec.allow_preemptible() ? "cheapest eligible (preemptible allowed)"
                                               : "cheapest eligible")
                   : spec.pool()},
      {"Progress", FormatProgressCell(job.progress())},
      {"Losses", FormatMetrics(job.progress().losses())},
      {"Restarts", absl::StrCat(job.restarts(), " of max ", spec.max_restarts(), " (attempt ",
                                job.attempt(), ")")},
      {"Checkpoint", job.latest_checkpoint().sha256().empty()
                         ? ""
                         : absl::StrCat("step ", job.latest_checkpoint().step(), " (epoch ",
                                        job.latest_checkpoint().epoch(), "), sha256 ",
                                        job.latest_checkpoint().sha256().substr(0, 12))},
      {"Workers", absl::StrJoin(job.assigned_workers(), ",")},
      {"Model", job.model_ref()},
      {"Device-hours", absl::StrFormat("%.4f", job.device_hours())},
      {"Cost", absl::StrFormat("%.4f USD%s", job.cost_usd(),
                               job.cost_note().empty() ? "" : " (" + job.cost_note() + ")")},
  };
  for (const v1::PoolUsage& u : job.pool_usage()) {
    rows.push_back({u.pool().empty() ? "  (no pool)" : "  pool " + u.pool(),
                    absl::StrFormat("%.4f device-h x %.4g USD = %.4f USD, %d attempt%s",
                                    u.device_hours(), u.price_per_device_hour(), u.cost_usd(),
                                    u.attempts(), u.attempts() == 1 ? "" : "s")});
  }
  rows.push_back({"Validation", job.validation_curve().empty()
                                    ? ""
                                    : absl::StrCat(job.validation_curve_size(),
                                                   " points (below; --json has every metric)")});
  for (auto& [key, value] : rows) {
    context.out << key << ":" << std::string(17 - key.size(), ' ')
                << (value.empty() ? "-" : EscapeControlText(value)) << '\n';
  }
  if (!job.validation_curve().empty()) {
    context.out << '\n' << FormatValidationCurve(job.validation_curve());
  }
  return absl::OkStatus();
}

absl::Status Cancel(CommandContext& context) {
  v1::CancelJobRequest request;
  request.set_job_id(context.args.Positional(0));
  request.set_reason(context.args.Get("reason").value_or(""));
  v1::Job job;
  RETURN_IF_ERROR(CallUnary(context, &TrainingService::Stub::CancelJob, request, &job));
  return PrintJob(context, job);
}

absl::Status Watch(CommandContext& context) {
  const std::string id = context.args.Positional(0);
  ASSIGN_OR_RETURN(int after, IntFlagOr(context.args, "after", 0));
  ASSIGN_OR_RETURN(const JobEnd end,
                   FollowJob(context, id, after, [&](const v1::JobEvent& event) -> absl::Status {
                     if (context.json) {
                       RETURN_IF_ERROR(PrintJson(context.out, event));
                     } else {
                       context.out << FormatJobEvent(event) << '\n';
                     }
                     context.out.flush();
                     return absl::OkStatus();
                   }));
  ReportEnd(context, id, end);
  return absl::OkStatus();
}

void PrintLogLine(std::ostream& out, const v1::LogLine& line) {
  out << "[rank " << line.rank() << "] " << (line.level().empty() ? "INFO" : line.level()) << " "
      << line.text() << '\n';
}

// `jobs logs --follow`: every log line from the start (they are job events), then new ones as
// they come, until the job ends (exit 0 however it ended).
absl::Status FollowLogs(CommandContext& context, int rank) {
  const std::string id = context.args.Positional(0);
  return FollowJob(context, id, 0,
                   [&](const v1::JobEvent& event) -> absl::Status {
                     if (!event.has_log() || (rank >= 0 && event.log().rank() != rank)) {
                       return absl::OkStatus();
                     }
                     if (context.json) {
                       RETURN_IF_ERROR(PrintJson(context.out, event.log()));
                     } else {
                       PrintLogLine(context.out, event.log());
                     }
                     context.out.flush();
                     return absl::OkStatus();
                   })
      .status();
}

absl::Status Logs(CommandContext& context) {
  ASSIGN_OR_RETURN(int rank, IntFlagOr(context.args, "rank", -1));
  ASSIGN_OR_RETURN(int tail, IntFlagOr(context.args, "tail", 0));
  if (context.args.Has("follow")) {
    if (tail != 0) {
      return UsageError("--tail and --follow cannot be combined: --follow prints every line");
    }
    return FollowLogs(context, rank);
  }
  v1::GetJobLogsRequest request;
  request.set_job_id(context.args.Positional(0));
  request.set_rank(rank);
  request.set_tail(tail);
  v1::GetJobLogsResponse response;
  RETURN_IF_ERROR(CallUnary(context, &TrainingService::Stub::GetJobLogs, request, &response));
  if (context.json) return PrintJsonArray(context.out, response.lines());
  for (const auto& line : response.lines()) PrintLogLine(context.out, line);
  return absl::OkStatus();
}

}  // namespace

void AddJobCommands(std::vector<Command>* commands) {
  std::vector<FlagSpec> submit_flags = JobSpecFlags();
  submit_flags.push_back({"request-id", "ID", "idempotency key: a retry returns the same job"});
  submit_flags.push_back({"dry-run", "",
                          "check the spec as a submit would and print the estimated duration, "
                          "device-hours and cost on each eligible pool; submit nothing"});
  submit_flags.push_back({"wait", "",
                          "wait until the job ends, printing its progress on stderr; exit 0 only "
                          "if it SUCCEEDED"});
  commands->push_back(
      {{"jobs", "submit"},
       "Submit a training job (it is stored as QUEUED and the command returns at once)",
       "Builds a JobSpec from --spec (protobuf JSON) and/or the flags (flags win), e.g.\n"
       "  gantry jobs submit --name ele-25 --preset 3dgan-25 --dataset ds-<id> --epochs 30 \\\n"
       "      --batch 64 --world-size 4 --label team=calo\n"
       "With --wait it follows the job (state changes, progress, checkpoints on stderr), prints\n"
       "the job as it ended and exits 1 when it FAILED or was CANCELLED.",
       {},
       submit_flags,
       Submit});
  commands->push_back({{"jobs", "list"},
                       "List jobs (newest first)",
                       "",
                       {},
                       {{"state", "STATE", "only jobs in this state, e.g. queued", true},
                        {"owner", "TENANT", "only jobs of this tenant (admins)"},
                        {"label", "K=V", "only jobs carrying this label", true},
                        {"limit", "N", "at most N jobs (default 50; 0 = all)"}},
                       List});
  commands->push_back({{"jobs", "get"}, "Show one job", "", {{"JOB_ID", "job-<uuid>"}}, {}, Get});
  commands->push_back({{"jobs", "cancel"},
                       "Cancel a job (QUEUED jobs end at once, running ones go CANCELLING)",
                       "",
                       {{"JOB_ID", "job-<uuid>"}},
                       {{"reason", "TEXT", "recorded in the transition message"}},
                       Cancel});
  commands->push_back(
      {{"jobs", "watch"},
       "Follow a job's events until it ends; exit 0 only if it SUCCEEDED",
       "Prints state changes (with reason and message), progress (epoch, step, losses, samples/s,\n"
       "ETA), log lines, checkpoints and the registered model, one line each. With --json, one\n"
       "JobEvent object per line. If the connection drops (UNAVAILABLE) it reconnects and resumes\n"
       "after the last event seen, for about two minutes.",
       {{"JOB_ID", "job-<uuid>"}},
       {{"after", "SEQ", "start after this event sequence number (default 0: from the start)"}},
       Watch});
  commands->push_back(
      {{"jobs", "logs"},
       "Print a job's log lines",
       "",
       {{"JOB_ID", "job-<uuid>"}},
       {{"rank", "N", "only this rank (default: all)"},
        {"tail", "N", "only the last N lines"},
        {"follow", "", "keep printing new lines until the job ends (from the first line)"}},
       Logs});
}

}  // namespace gantry::cli
