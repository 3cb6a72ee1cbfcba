// Studies end to end: a real gantry-server, two real gantry-worker daemons (one slot each) and
// their rank processes train the tiny preset on toy Monte Carlo. A 4-trial study with 2 trials in
// parallel and K=2 folds runs to the end across a server restart: never more than 2 trials at
// once, each fold validated on its own half of the events, mean and spread from the folds, the
// best model aliased with the study and carrying it in its lineage, nothing lost or submitted
// twice by the restart. A second study is cancelled mid-trial and every trial job stops.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/worker_pool_fixture.h"
#include "tests/support/build_paths.h"

namespace gantry::testing {
namespace {

constexpr int kEvents = 40;

class StudiesE2eTest : public WorkerPoolFixture {
 protected:
  // A fixed port of this test's range, so a restarted server is found again by the daemons.
  StudiesE2eTest() { server_listen_ = "127.0.0.1:46000"; }

  // The fixture's flags on the same address; the study driver's default interval (1 s) is quick
  // enough here.
  void RestartServer() { StartGantryServer(server_listen_); }

  static bool Ended(v1::JobState s) {
    return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED ||
           s == v1::JOB_STATE_CANCELLED;
  }
  static bool Ended(v1::StudyState s) {
    return s == v1::STUDY_STATE_SUCCEEDED || s == v1::STUDY_STATE_FAILED ||
           s == v1::STUDY_STATE_CANCELLED;
  }

  // One epoch on 20 training events (K=2 of 40), batch 4: 5 steps; validation on the other 20.
  v1::StudySpec Spec(int folds) {
    v1::StudySpec spec;
    spec.set_display_name("e2e-study");
    v1::JobSpec* job = spec.mutable_base_job();
    job->set_model_preset("tiny");
    job->set_dataset(absl::StrCat("toymc:layout=25,events=", kEvents, ",seed=5,emin=20,emax=200"));
    job->mutable_hyper_parameters()->set_epochs(1);
    job->mutable_hyper_parameters()->set_batch_per_rank(4);
    job->mutable_resources_per_rank()->set_threads(1);
    job->set_world_size(1);
    job->set_max_restarts(1);
    job->mutable_validation()->set_showers_per_bin(20);
    job->set_model_name("e2e-study");
    v1::SearchParameter* lr = spec.add_parameters();
    lr->set_name("hyper_parameters.learning_rate");
    lr->set_kind(v1::SearchParameter::KIND_LOG_CONTINUOUS);
    lr->set_min(1e-4);
    lr->set_max(1e-2);
    spec.set_algorithm(v1::SEARCH_ALGORITHM_RANDOM);
    spec.mutable_budget()->set_max_trials(4);
    spec.mutable_budget()->set_max_parallel_trials(2);
    spec.set_folds(folds);
    spec.set_seed(17);
    return spec;
  }

  v1::Study Create(const v1::StudySpec& spec) {
    v1::CreateStudyRequest request;
    *request.mutable_spec() = spec;
    v1::Study study;
    grpc::Status s = studies_->CreateStudy(Ctx(token_).get(), request, &study);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return study;
  }

  // GetStudy; an unreachable server (mid-restart) gives an empty study.
  v1::Study GetStudy(const std::string& id) {
    v1::GetStudyRequest request;
    request.set_study_id(id);
    v1::Study study;
    if (studies_ == nullptr) return study;
    (void)studies_->GetStudy(Ctx(token_).get(), request, &study);
    return study;
  }

  std::vector<v1::Trial> Trials(const std::string& id) {
    v1::ListTrialsRequest request;
    request.set_study_id(id);
    v1::ListTrialsResponse response;
    if (studies_ == nullptr) return {};
    if (!studies_->ListTrials(Ctx(token_).get(), request, &response).ok()) return {};
    return {response.trials().begin(), response.trials().end()};
  }

  std::vector<v1::Job> StudyJobs(const std::string& id) {
    v1::ListJobsRequest request;
    (*request.mutable_label_selector())["study"] = id;
    v1::ListJobsResponse response;
    grpc::Status s = training_->ListJobs(Ctx(token_).get(), request, &response);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return {response.jobs().begin(), response.jobs().end()};
  }

  // Trials whose jobs are not all terminal (what "running at once" means for the slots), and the
  // study's RUNNING trials.
  void CountRunning(const std::string& id, int* max_trials_with_live_jobs, int* max_running) {
    std::set<std::string> live;
    for (const v1::Job& job : StudyJobs(id)) {
      if (!Ended(job.state())) {
        live.insert(job.spec().labels().at("study-trial"));
      }
    }
    *max_trials_with_live_jobs =
        std::max(*max_trials_with_live_jobs, static_cast<int>(live.size()));
    int running = 0;
    for (const v1::Trial& t : Trials(id)) running += t.state() == v1::TRIAL_STATE_RUNNING;
    *max_running = std::max(*max_running, running);
  }

  // Runs `gantry --server ... --token ... <args>` and returns its exit code; `out` gets stdout.
  int Cli(const std::vector<std::string>& args, std::string* out) {
    const std::string path = dir_.path() + "/cli.out";
    std::vector<std::string> argv = {GANTRY_CLI_BINARY, "--server", server_->address(), "--token",
                                     token_};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess cli(argv, path);
    const int code = cli.Wait(30000);
    *out = cli.Log();
    return code;
  }

  v1::ModelVersion GetModel(const std::string& ref) {
    v1::GetModelRequest request;
    request.set_model(ref);
    v1::ModelVersion model;
    grpc::Status s = catalog_->GetModel(Ctx(token_).get(), request, &model);
    EXPECT_TRUE(s.ok()) << ref << ": " << Describe(s);
    return model;
  }
};

TEST_F(StudiesE2eTest, FourTrialsTwoInParallelWithTwoFoldsSurviveARestart) {
  StartWorker("w0", 46100);
  StartWorker("w1", 46130);
  WaitForFreeWorkers(2);
  const auto start = steady_clock::now();
  const v1::Study created = Create(Spec(/*folds=*/2));
  ASSERT_FALSE(created.id().empty());

  int max_live = 0;
  int max_running = 0;
  bool restarted = false;
  std::vector<v1::Trial> before_restart;
  v1::Study study = created;
  const auto until = start + seconds(240);
  while (steady_clock::now() < until && !Ended(study.state())) {
    CountRunning(created.id(), &max_live, &max_running);
    study = GetStudy(created.id());
    // Mid-study (a trial done, others to come): SIGTERM the server and start it again.
    if (!restarted && study.trials_finished() >= 1 && study.trials_finished() < 4) {
      before_restart = Trials(created.id());
      ASSERT_EQ(StopServer(), 0);
      std::this_thread::sleep_for(seconds(2));
      RestartServer();
      restarted = true;
      // What was stored before is all there, unchanged (the unfinished parts may have moved on).
      const std::vector<v1::Trial> after = Trials(created.id());
      ASSERT_GE(after.size(), before_restart.size());
      for (size_t i = 0; i < before_restart.size(); ++i) {
        EXPECT_EQ(after[i].number(), before_restart[i].number());
        EXPECT_EQ(after[i].parameters().at("hyper_parameters.learning_rate").number(),
                  before_restart[i].parameters().at("hyper_parameters.learning_rate").number());
        for (int f = 0; f < before_restart[i].folds_size(); ++f) {
          EXPECT_EQ(after[i].folds(f).job_id(), before_restart[i].folds(f).job_id());
        }
        if (before_restart[i].state() != v1::TRIAL_STATE_RUNNING) {
          EXPECT_EQ(after[i].state(), before_restart[i].state());
          EXPECT_EQ(after[i].objective(), before_restart[i].objective());
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  const double wall = std::chrono::duration<double>(steady_clock::now() - start).count();
  std::cerr << "study wall time: " << wall << " s\n";
  ASSERT_EQ(study.state(), v1::STUDY_STATE_SUCCEEDED) << study.DebugString() << Logs();
  EXPECT_TRUE(restarted) << "the study ended before a restart could happen mid-study";
  EXPECT_LE(max_live, 2) << "more than max_parallel_trials trials had jobs at once";
  EXPECT_LE(max_running, 2);
  EXPECT_EQ(max_running, 2) << "the two parallel slots were never used together";

  // Four trials of two folds: eight jobs, none submitted twice across the restart.
  const std::vector<v1::Trial> trials = Trials(created.id());
  ASSERT_EQ(trials.size(), 4u);
  const std::vector<v1::Job> jobs = StudyJobs(created.id());
  EXPECT_EQ(jobs.size(), 8u);
  std::set<std::string> job_ids;
  double best = INFINITY;
  int best_trial = 0;
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::TRIAL_STATE_SUCCEEDED) << t.DebugString();
    ASSERT_EQ(t.folds_size(), 2);
    std::vector<double> values;
    int validated = 0;
    for (const v1::FoldResult& f : t.folds()) {
      EXPECT_TRUE(job_ids.insert(f.job_id()).second);
      EXPECT_EQ(f.job_state(), v1::JOB_STATE_SUCCEEDED);
      ASSERT_TRUE(f.has_objective());
      values.push_back(f.objective());
      EXPECT_GT(f.device_hours(), 0);
      // The fold's model: validated on its own fold (half of the events), the objective is its
      // fom, and its lineage names the study and trial.
      const v1::ModelVersion model = GetModel(f.model_ref());
      EXPECT_DOUBLE_EQ(model.metrics().at("fom"), f.objective());
      validated += static_cast<int>(model.metrics().at("holdout_events"));
      EXPECT_EQ(model.lineage().study_id(), created.id());
      EXPECT_EQ(model.lineage().study_trial(), t.number());
      const v1::Job job = Get(f.job_id());
      EXPECT_EQ(job.spec().data_split().validation_fold(), f.fold());
      EXPECT_EQ(job.spec().labels().at("study"), created.id());
    }
    // The two folds validated disjoint halves that cover the data.
    EXPECT_EQ(validated, kEvents);
    const double mean = (values[0] + values[1]) / 2;
    EXPECT_NEAR(t.objective(), mean, 1e-9);
    EXPECT_NEAR(t.objective_stddev(), std::abs(values[0] - values[1]) / std::sqrt(2.0), 1e-9);
    EXPECT_GT(t.device_hours(), 0);
    if (t.objective() < best) {
      best = t.objective();
      best_trial = t.number();
    }
  }

  // The best trial's better fold is the study's model, aliased with the study id.
  EXPECT_EQ(study.best_trial(), best_trial);
  EXPECT_DOUBLE_EQ(study.best_objective(), best);
  ASSERT_FALSE(study.best_model_ref().empty());
  const v1::ModelVersion aliased = GetModel(absl::StrCat("e2e-study@", created.id()));
  EXPECT_EQ(absl::StrCat(aliased.name(), ":", aliased.version()), study.best_model_ref());
  EXPECT_EQ(aliased.lineage().study_id(), created.id());
  EXPECT_EQ(aliased.lineage().study_trial(), best_trial);
  EXPECT_EQ(study.trials_finished(), 4);
  EXPECT_GT(study.device_hours(), 0);
  EXPECT_NE(study.message().find("best trial"), std::string::npos) << study.message();

  // The CLI shows the same: four SUCCEEDED trials with their folds, the study with its model.
  std::string out;
  ASSERT_EQ(Cli({"studies", "trials", created.id(), "--folds"}, &out), 0) << out;
  size_t succeeded = 0;
  for (size_t at = out.find("SUCCEEDED"); at != std::string::npos;
       at = out.find("SUCCEEDED", at + 1)) {
    ++succeeded;
  }
  EXPECT_EQ(succeeded, 4u + 8u) << out;  // 4 trials, then 8 fold jobs
  EXPECT_NE(out.find("learning_rate="), std::string::npos) << out;
  ASSERT_EQ(Cli({"studies", "get", created.id()}, &out), 0) << out;
  EXPECT_NE(out.find(study.best_model_ref()), std::string::npos) << out;
  ASSERT_EQ(Cli({"studies", "watch", created.id()}, &out), 0) << out;
  EXPECT_NE(out.find("[####################] 4/4 trials done"), std::string::npos) << out;
}

TEST_F(StudiesE2eTest, CancellingAStudyStopsEveryTrialJob) {
  StartWorker("w0", 46160);
  WaitForFreeWorkers(1);
  v1::StudySpec spec = Spec(/*folds=*/0);
  spec.mutable_base_job()->mutable_hyper_parameters()->set_epochs(20);  // still running at cancel
  const v1::Study created = Create(spec);
  ASSERT_FALSE(created.id().empty());
  // Wait until one trial job trains.
  bool running = false;
  const auto until = steady_clock::now() + seconds(90);
  while (!running && steady_clock::now() < until) {
    for (const v1::Job& job : StudyJobs(created.id())) {
      running = running || job.state() == v1::JOB_STATE_RUNNING;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(running) << Logs();
  EXPECT_EQ(StudyJobs(created.id()).size(), 2u);  // two trials, one job each (no folds)

  v1::CancelStudyRequest cancel;
  cancel.set_study_id(created.id());
  v1::Study study;
  grpc::Status s = studies_->CancelStudy(Ctx(token_).get(), cancel, &study);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(study.state(), v1::STUDY_STATE_CANCELLING);
  const auto cancel_until = steady_clock::now() + seconds(60);
  while (study.state() != v1::STUDY_STATE_CANCELLED && steady_clock::now() < cancel_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    study = GetStudy(created.id());
  }
  ASSERT_EQ(study.state(), v1::STUDY_STATE_CANCELLED) << study.DebugString() << Logs();
  const std::vector<v1::Job> jobs = StudyJobs(created.id());
  EXPECT_EQ(jobs.size(), 2u);
  for (const v1::Job& job : jobs) EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED) << job.id();
  for (const v1::Trial& t : Trials(created.id())) {
    EXPECT_EQ(t.state(), v1::TRIAL_STATE_CANCELLED) << t.number();
  }
  // The worker is free again.
  WaitForFreeWorkers(1, 30);
}

}  // namespace
}  // namespace gantry::testing
