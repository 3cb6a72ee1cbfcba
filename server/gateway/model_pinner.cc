#include "server/gateway/model_pinner.h"

#include <algorithm>
#include <iostream>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "grpcpp/client_context.h"

namespace gantry::server {

namespace v1 = ::gantry::v1;

namespace {

// Every field `want` sets has the same value in `have`.
bool SettingsMatch(const v1::BatchingSettings& want, const v1::BatchingSettings& have) {
  return (!want.has_max_batch_size() || want.max_batch_size() == have.max_batch_size()) &&
         (!want.has_max_queue_delay_ms() ||
          want.max_queue_delay_ms() == have.max_queue_delay_ms()) &&
         (!want.has_max_queued_requests() ||
          want.max_queued_requests() == have.max_queued_requests()) &&
         (!want.has_priority_levels() || want.priority_levels() == have.priority_levels());
}

// The pinned models a heartbeat reports, by checkpoint.
std::map<std::string, v1::LoadedModel> PinnedIn(const WorkerReport* report) {
  std::map<std::string, v1::LoadedModel> out;
  if (report == nullptr) return out;
  for (const v1::LoadedModel& m : report->heartbeat.loaded_models()) {
    if (m.pinned()) out[m.checkpoint_sha256()] = m;
  }
  return out;
}

v1::WorkerLoadModelRequest WorkerRequestOf(const storage::ModelPin& pin) {
  v1::WorkerLoadModelRequest load;
  *load.mutable_model() = pin.served;
  *load.mutable_batching() = pin.request.batching();
  return load;
}

}  // namespace

ModelPinner::ModelPinner(storage::ModelPinRepository& model_pins,
                         storage::WorkerRepository& workers, scheduler::GenerationRouter& router,
                         WorkerSessions& sessions, const WorkerChannelSettings& worker_channels,
                         absl::Duration interval)
    : model_pins_(model_pins),
      workers_(workers),
      router_(router),
      sessions_(sessions),
      channels_(worker_channels),
      task_(interval, [this] { ReconcileOnce(); }) {}

ModelPinner::~ModelPinner() { Stop(); }

std::vector<ModelPinner::Candidate> ModelPinner::TargetsOf(
    const storage::ModelPin& pin, const std::vector<Candidate>& serving,
    const std::map<std::string, WorkerReport>& reports) const {
  const v1::LoadModelRequest& r = pin.request;
  std::vector<Candidate> out;
  if (r.workers_size() > 0) {
    const std::set<std::string> named(r.workers().begin(), r.workers().end());
    for (const Candidate& c : serving) {
      if (named.count(c.worker_id) > 0 || named.count(c.name) > 0) out.push_back(c);
    }
    return out;
  }
  if (r.worker_count() <= 0) return serving;
  // Keep it where it is pinned already, then the least busy (the router's order).
  for (const Candidate& c : serving) {
    auto it = reports.find(c.worker_id);
    if (it != reports.end() && PinnedIn(&it->second).count(pin.served.checkpoint_sha256()) > 0) {
      out.push_back(c);
    }
  }
  for (const Candidate& c : serving) {
    if (static_cast<int>(out.size()) >= r.worker_count()) break;
    if (std::none_of(out.begin(), out.end(),
                     [&](const Candidate& o) { return o.worker_id == c.worker_id; })) {
      out.push_back(c);
    }
  }
  if (static_cast<int>(out.size()) > r.worker_count()) out.resize(r.worker_count());
  return out;
}

v1::ModelLoadOutcome ModelPinner::CallLoad(const Candidate& worker,
                                           const v1::WorkerLoadModelRequest& load) {
  v1::ModelLoadOutcome outcome;
  outcome.set_worker_id(worker.worker_id);
  outcome.set_worker_name(worker.name);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kLoadTimeout));
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", worker.secret));
  v1::WorkerLoadModelResponse response;
  const grpc::Status s = channels_.StubFor(worker.endpoint).LoadModel(&ctx, load, &response);
  if (!s.ok()) {
    outcome.set_error(
        absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())), ": ",
                     s.error_message()));
    GANTRY_LOG(WARNING) << "load " << load.model().model_ref() << " on " << worker.name << ": "
                        << outcome.error();
    return outcome;
  }
  outcome.set_loaded(true);
  outcome.set_warm(response.warm());
  outcome.set_load_ms(response.load_ms());
  outcome.set_warmup_ms(response.warmup_ms());
  *outcome.mutable_batching() = response.batching();
  GANTRY_LOG(INFO) << "loaded " << load.model().model_ref() << " on " << worker.name
                   << " (pinned, load " << response.load_ms() << " ms, warm-up "
                   << response.warmup_ms() << " ms)";
  return outcome;
}

v1::ModelLoadOutcome ModelPinner::CallUnload(const Candidate& worker, const std::string& sha256) {
  v1::ModelLoadOutcome outcome;
  outcome.set_worker_id(worker.worker_id);
  outcome.set_worker_name(worker.name);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", worker.secret));
  v1::WorkerUnloadModelRequest request;
  request.set_checkpoint_sha256(sha256);
  v1::WorkerUnloadModelResponse response;
  const grpc::Status s = channels_.StubFor(worker.endpoint).UnloadModel(&ctx, request, &response);
  if (!s.ok()) {
    outcome.set_loaded(true);
    outcome.set_error(
        absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())), ": ",
                     s.error_message()));
    return outcome;
  }
  // Still loaded while requests use it; it goes with the last one.
  outcome.set_loaded(response.was_loaded() && !response.unloaded());
  if (outcome.loaded()) outcome.set_error("requests in flight; unloads when they finish");
  return outcome;
}

absl::StatusOr<v1::LoadModelResponse> ModelPinner::Load(const v1::LoadModelRequest& request,
                                                        const v1::ModelVersion& model) {
  absl::MutexLock op(&op_mu_);
  // Named workers must exist (connected or not).
  std::vector<std::string> absent;  // named, registered, not serving now
  if (request.workers_size() > 0) {
    ASSIGN_OR_RETURN(std::vector<v1::WorkerInfo> registered, workers_.List());
    for (const std::string& w : request.workers()) {
      if (std::none_of(registered.begin(), registered.end(),
                       [&](const v1::WorkerInfo& i) { return i.id() == w || i.name() == w; })) {
        return absl::NotFoundError(absl::StrCat("workers: no registered worker is named \"",
                                                BoundedField(w), "\" (see gantry admin workers)"));
      }
    }
  }
  storage::ModelPin pin;
  pin.owner = model.owner();
  pin.name = model.name();
  pin.version = model.version();
  pin.request = request;
  pin.request.set_model(absl::StrCat(model.owner(), "/", model.name(), ":", model.version()));
  v1::ServedModel& served = pin.served;
  served.set_checkpoint_sha256(model.checkpoint_sha256());
  served.set_checkpoint_size_bytes(model.checkpoint_size_bytes());
  served.set_model_ref(absl::StrCat(model.name(), ":", model.version()));
  *served.mutable_energy_range_gev() = model.energy_range_gev();
  *served.mutable_theta_range_rad() = model.theta_range_rad();
  RETURN_IF_ERROR(model_pins_.Put(pin));

  const absl::Time now = absl::Now();
  const std::vector<Candidate> targets =
      TargetsOf(pin, router_.Candidates(served.checkpoint_sha256(), now), sessions_.Reports());
  const v1::WorkerLoadModelRequest load = WorkerRequestOf(pin);
  std::vector<v1::ModelLoadOutcome> outcomes(targets.size());
  std::vector<std::thread> calls;
  for (size_t i = 0; i < targets.size(); ++i) {
    calls.emplace_back([&, i] { outcomes[i] = CallLoad(targets[i], load); });
  }
  for (std::thread& t : calls) t.join();

  v1::LoadModelResponse response;
  response.set_model_ref(served.model_ref());
  response.set_checkpoint_sha256(served.checkpoint_sha256());
  for (size_t i = 0; i < targets.size(); ++i) {
    asked_[{targets[i].worker_id, served.checkpoint_sha256()}] = absl::Now();
    if (outcomes[i].loaded() && outcomes[i].warm()) {
      response.set_warm_workers(response.warm_workers() + 1);
    }
    *response.add_workers() = std::move(outcomes[i]);
  }
  for (const std::string& w : request.workers()) {
    if (std::none_of(targets.begin(), targets.end(),
                     [&](const Candidate& c) { return c.worker_id == w || c.name == w; })) {
      v1::ModelLoadOutcome* o = response.add_workers();
      o->set_worker_name(w);
      o->set_error("not connected or not serving generation; it loads when it connects");
    }
  }
  return response;
}

absl::StatusOr<v1::UnloadModelResponse> ModelPinner::Unload(const v1::ModelVersion& model) {
  absl::MutexLock op(&op_mu_);
  ASSIGN_OR_RETURN(bool deleted, model_pins_.Delete(model.owner(), model.name(), model.version()));
  const std::string ref = absl::StrCat(model.name(), ":", model.version());
  if (!deleted) {
    return absl::NotFoundError(
        absl::StrCat("model: ", ref, " is not loaded by LoadModel (nothing to unload)"));
  }
  const std::map<std::string, WorkerReport> reports = sessions_.Reports();
  v1::UnloadModelResponse response;
  response.set_model_ref(ref);
  for (const Candidate& c : router_.Candidates(model.checkpoint_sha256(), absl::Now())) {
    auto it = reports.find(c.worker_id);
    if (it == reports.end() || PinnedIn(&it->second).count(model.checkpoint_sha256()) == 0) {
      // Not pinned there as far as its last heartbeat says: ask anyway (it may have been loaded
      // since), but report only workers that had it.
      v1::ModelLoadOutcome o = CallUnload(c, model.checkpoint_sha256());
      if (o.loaded()) *response.add_workers() = std::move(o);
      continue;
    }
    *response.add_workers() = CallUnload(c, model.checkpoint_sha256());
    asked_[{c.worker_id, model.checkpoint_sha256()}] = absl::Now();
  }
  return response;
}

void ModelPinner::ReconcileOnce() {
  absl::MutexLock op(&op_mu_);
  absl::StatusOr<std::vector<storage::ModelPin>> pins = model_pins_.List();
  if (!pins.ok()) return;  // the database is away; try again next time
  const absl::Time now = absl::Now();
  const std::map<std::string, WorkerReport> reports = sessions_.Reports();
  const std::vector<Candidate> serving = router_.Candidates("", now);
  // worker id -> checkpoint -> the pin wanted there.
  std::map<std::string, std::map<std::string, const storage::ModelPin*>> wanted;
  for (const storage::ModelPin& pin : *pins) {
    for (const Candidate& c : TargetsOf(pin, serving, reports)) {
      wanted[c.worker_id][pin.served.checkpoint_sha256()] = &pin;
    }
  }
  auto recently_asked = [&](const std::string& worker, const std::string& sha)
                            ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_) {
                              auto it = asked_.find({worker, sha});
                              return it != asked_.end() && now < it->second + kRetryAfter;
                            };
  for (const Candidate& c : serving) {
    auto report = reports.find(c.worker_id);
    if (report == reports.end()) continue;  // no heartbeat yet: nothing to compare with
    const std::map<std::string, v1::LoadedModel> pinned = PinnedIn(&report->second);
    for (const auto& [sha, pin] : wanted[c.worker_id]) {
      auto have = pinned.find(sha);
      if (have != pinned.end() && SettingsMatch(pin->request.batching(), have->second.batching()))
        continue;
      if (recently_asked(c.worker_id, sha)) continue;
      asked_[{c.worker_id, sha}] = now;
      CallLoad(c, WorkerRequestOf(*pin));
    }
    for (const auto& [sha, model] : pinned) {
      if (wanted[c.worker_id].count(sha) > 0 || recently_asked(c.worker_id, sha)) continue;
      asked_[{c.worker_id, sha}] = now;
      CallUnload(c, sha);
      GANTRY_LOG(INFO) << "unpinned " << sha.substr(0, 12) << " on " << c.name
                       << " (no pin wants it there)";
    }
  }
}

}  // namespace gantry::server
