// Elastic pools end to end, with real processes: a gantry-server whose autoscaler runs the command
// provisioner (scripts that start and stop real gantry-worker daemons) and the Slurm provisioner
// (a private slurmctld + slurmd + munged from deploy/local/slurm.sh; pilots are real sbatch jobs).
// Also the bad input: invalid pool specs, an unknown pool, a failing and a hanging provisioner, an
// unreachable Slurm. Ports: the server 49500-49509, daemons' rendezvous 49520-49799, Slurm 49820-1.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gantry/v1/admin.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

const std::string kScripts = gantry::testing::SourcePath("tests/e2e/pool_scripts");

// Output of a command (stdout and stderr), empty on failure to run.
std::string Output(const std::string& command) {
  std::string out;
  ChildProcess::RunToExit({"/bin/sh", "-c", command}, &out);
  return out;
}

// SIGKILLs every process whose command line mentions `text`.
void KillProcessesMentioning(const std::string& text) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return;
  while (dirent* e = readdir(proc)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (absl::StrContains(cmdline, text)) kill(pid, SIGKILL);
  }
  closedir(proc);
}

// Alive and not a zombie (daemons a script started are reparented; their reaper may be slow).
bool Running(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

class PoolsE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file_, "e2e-join-token-0123456789abcdef\n");
    state_dir_ = dir_.path() + "/workers";
    StartServer({"--join-token-file", join_token_file_, "--heartbeat-interval-ms", "300",
                 "--lease-timeout-ms", "8000", "--rank-exit-grace-seconds", "10",
                 "--autoscale-interval-ms", "500", "--pool-idle-timeout-seconds", "4",
                 "--pool-backoff-seconds", "2", "--listen=127.0.0.1:" + std::to_string(Port())});
    token_ = NewTenant("physics");
  }

  void TearDown() override {
    // Daemons the scale-up script started and the scale-down did not stop.
    if (DIR* d = opendir(state_dir_.c_str())) {
      while (dirent* e = readdir(d)) {
        if (!absl::EndsWith(e->d_name, ".pid")) continue;
        std::ifstream in(state_dir_ + "/" + e->d_name);
        int pid = 0;
        if (in >> pid && pid > 0) kill(pid, SIGKILL);
      }
      closedir(d);
    }
    if (slurm_started_) {
      if (!slurm_conf_.empty()) {
        Output("SLURM_CONF=" + slurm_conf_ + " scancel --name=gantry-pilot-hpc 2>&1");
        for (int i = 0; i < 20; ++i) {
          if (Output("SLURM_CONF=" + slurm_conf_ + " squeue -h -n gantry-pilot-hpc").empty()) break;
          std::this_thread::sleep_for(milliseconds(500));
        }
      }
      Output(SlurmEnv() + " " + GANTRY_SOURCE_DIR + "/deploy/local/slurm.sh stop 2>&1");
      // Pilot daemons that outlived slurmd: only ours (their cache dir is under this test's dir).
      KillProcessesMentioning(dir_.path() + "/pilots");
    }
    ServerFixture::TearDown();
  }

  // A port in this test's range, different per test (a restart may find the last one in
  // TIME_WAIT).
  static int Port() {
    static int next = 49500;
    return next++;
  }

  std::string SlurmEnv() const {
    return "GANTRY_SLURM_DIR=" + dir_.path() + "/slurm GANTRY_SLURM_PORT=49820";
  }

  v1::Pool Get(const std::string& name) {
    v1::GetPoolRequest request;
    request.set_name(name);
    v1::Pool pool;
    grpc::Status st = admin_->GetPool(Ctx(admin_token_).get(), request, &pool);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return pool;
  }

  grpc::Status Create(const std::string& name, const v1::PoolSpec& spec, v1::Pool* out = nullptr) {
    v1::CreatePoolRequest request;
    request.set_name(name);
    *request.mutable_spec() = spec;
    v1::Pool pool;
    grpc::Status st = admin_->CreatePool(Ctx(admin_token_).get(), request, &pool);
    if (out != nullptr) *out = pool;
    return st;
  }

  v1::PoolSpec CommandSpec(const std::string& up, const std::string& down, int max) {
    v1::PoolSpec spec;
    spec.set_device(v1::DEVICE_KIND_CPU);
    spec.set_price_per_device_hour(0.5);
    spec.set_min_workers(0);
    spec.set_max_workers(max);
    spec.set_slots_per_worker(1);
    v1::CommandProvisioner* c = spec.mutable_provisioner()->mutable_command();
    for (absl::string_view a : absl::StrSplit(up, ' ', absl::SkipEmpty())) {
      c->add_scale_up(std::string(a));
    }
    for (absl::string_view a : absl::StrSplit(down, ' ', absl::SkipEmpty())) {
      c->add_scale_down(std::string(a));
    }
    c->set_timeout_seconds(20);
    return spec;
  }

  // Two ranks of the tiny preset, 2 epochs of a small toy set: ~20 s on 2 cores.
  v1::JobSpec Spec(const std::string& pool) {
    v1::JobSpec spec;
    spec.set_display_name("pools-e2e");
    spec.set_model_preset("tiny");
    spec.set_dataset("toymc:layout=25,events=64,seed=5,emin=20,emax=200");
    spec.mutable_hyper_parameters()->set_epochs(1);
    spec.mutable_hyper_parameters()->set_batch_per_rank(4);
    spec.mutable_hyper_parameters()->set_seed(11);
    spec.mutable_resources_per_rank()->set_threads(1);
    spec.set_world_size(2);
    spec.set_pool(pool);
    spec.mutable_validation()->set_holdout_fraction(0.2);
    spec.mutable_validation()->set_showers_per_bin(10);
    return spec;
  }

  // Polls GetPool until `done` holds, up to timeout_s.
  template <typename Pred>
  v1::Pool WaitForPool(const std::string& name, Pred done, int timeout_s) {
    const auto until = steady_clock::now() + seconds(timeout_s);
    v1::Pool pool = Get(name);
    while (!done(pool) && steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(250));
      pool = Get(name);
    }
    return pool;
  }

  // Polls the job until its message contains `text`.
  v1::Job WaitForMessage(const std::string& id, const std::string& text, int timeout_s) {
    const auto until = steady_clock::now() + seconds(timeout_s);
    v1::Job job = GetJob(token_, id);
    while (!absl::StrContains(job.message(), text) && steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(250));
      job = GetJob(token_, id);
    }
    return job;
  }

  int LiveDaemons() {
    int live = 0;
    if (DIR* d = opendir(state_dir_.c_str())) {
      while (dirent* e = readdir(d)) {
        if (!absl::EndsWith(e->d_name, ".pid")) continue;
        std::ifstream in(state_dir_ + "/" + e->d_name);
        int pid = 0;
        if (in >> pid && pid > 0 && Running(pid)) ++live;
      }
      closedir(d);
    }
    return live;
  }

  std::string join_token_file_;
  std::string state_dir_;
  std::string token_;
  bool slurm_started_ = false;
  std::string slurm_conf_;
};

TEST_F(PoolsE2eTest, BadPoolSpecsAndUnknownPoolsAreRefusedWithWhatToChange) {
  v1::PoolSpec spec = CommandSpec("/bin/true", "", 2);
  struct Case {
    std::string name;
    std::function<void(v1::PoolSpec&)> change;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"neg", [](v1::PoolSpec& s) { s.set_price_per_device_hour(-1); }, "price_per_device_hour"},
      {"minmax", [](v1::PoolSpec& s) { s.set_min_workers(3); },
       "min_workers 3 is above max_workers 2"},
      {"nomax", [](v1::PoolSpec& s) { s.set_max_workers(0); }, "spec.max_workers"},
      {"relative",
       [](v1::PoolSpec& s) {
         s.mutable_provisioner()->mutable_command()->set_scale_up(0, "up.sh");
       },
       "absolute path"},
      {"Bad_Name", [](v1::PoolSpec&) {}, "pool name"},
      {"label", [](v1::PoolSpec& s) { (*s.mutable_labels())["pool"] = "x"; }, "set by gantry"},
      {"slurm",
       [](v1::PoolSpec& s) { s.mutable_provisioner()->mutable_slurm()->set_server_address("x"); },
       "server_address"},
  };
  for (const Case& c : cases) {
    v1::PoolSpec bad = spec;
    c.change(bad);
    grpc::Status st = Create(c.name, bad);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    EXPECT_TRUE(absl::StrContains(st.error_message(), c.expect))
        << c.name << ": " << st.error_message();
  }
  ASSERT_TRUE(Create("cloud", spec).ok());
  EXPECT_EQ(Create("cloud", spec).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  v1::GetPoolRequest get;
  get.set_name("nope");
  v1::Pool pool;
  EXPECT_EQ(admin_->GetPool(Ctx(admin_token_).get(), get, &pool).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // A job naming an unknown pool is refused at submission, naming the pools there are.
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = Spec("nope");
  v1::Job job;
  grpc::Status st = training_->SubmitJob(Ctx(token_).get(), submit, &job);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(
      absl::StrContains(st.error_message(), "no pool is named \"nope\"; defined pools: cloud"))
      << st.error_message();
  // Only admins manage pools.
  v1::ListPoolsResponse list;
  EXPECT_EQ(admin_->ListPools(Ctx(token_).get(), {}, &list).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::DeletePoolRequest del;
  del.set_name("cloud");
  v1::DeletePoolResponse deleted;
  EXPECT_TRUE(admin_->DeletePool(Ctx(admin_token_).get(), del, &deleted).ok());
  EXPECT_EQ(admin_->DeletePool(Ctx(admin_token_).get(), del, &deleted).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(PoolsE2eTest, CommandProvisionerGrowsForAGangAndShrinksToZero) {
  const std::string up =
      absl::StrCat(kScripts, "/scale_up.sh ", state_dir_, " ", GANTRY_WORKER_BINARY, " ",
                   server_->address(), " ", join_token_file_, " 49520");
  const std::string down = absl::StrCat(kScripts, "/scale_down.sh ", state_dir_);
  // A pool whose provisioner hangs (timeout 2 s) and one whose provisioner fails, both cheaper:
  // jobs naming them wait with the error; the burst pool's job runs meanwhile (nothing blocks).
  v1::PoolSpec hang = CommandSpec(kScripts + "/hang.sh", "", 4);
  hang.mutable_provisioner()->mutable_command()->set_timeout_seconds(2);
  hang.set_price_per_device_hour(0.1);
  ASSERT_TRUE(Create("hang", hang).ok());
  v1::PoolSpec fail = CommandSpec(kScripts + "/fail.sh", "", 4);
  fail.set_price_per_device_hour(0.2);
  ASSERT_TRUE(Create("broken", fail).ok());
  v1::PoolSpec burst = CommandSpec(up, down, 2);
  burst.set_price_per_device_hour(0.5);
  ASSERT_TRUE(Create("burst", burst).ok());
  v1::PoolSpec dear = CommandSpec(up, down, 2);
  dear.set_price_per_device_hour(9);
  ASSERT_TRUE(Create("dear", dear).ok());

  const v1::Job hung = SubmitJob(token_, Spec("hang"));
  const v1::Job broken = SubmitJob(token_, Spec("broken"));
  // No pool named: the cheapest eligible one is chosen. hang and broken are cheaper but
  // preemptible-free too... so mark them preemptible to leave "burst" the cheapest eligible.
  v1::UpdatePoolRequest update;
  update.set_name("hang");
  *update.mutable_spec() = hang;
  update.mutable_spec()->set_preemptible(true);
  v1::Pool updated;
  ASSERT_TRUE(admin_->UpdatePool(Ctx(admin_token_).get(), update, &updated).ok());
  update.set_name("broken");
  *update.mutable_spec() = fail;
  update.mutable_spec()->set_preemptible(true);
  ASSERT_TRUE(admin_->UpdatePool(Ctx(admin_token_).get(), update, &updated).ok());
  const auto started = steady_clock::now();
  const v1::Job job = SubmitJob(token_, Spec(""));

  // Two daemons start for the gang of two, the job runs on them and succeeds.
  v1::Pool pool = WaitForPool(
      "burst", [](const v1::Pool& p) { return p.status().workers() == 2; }, 60);
  EXPECT_EQ(pool.status().workers(), 2) << pool.DebugString() << server_->Stderr();
  EXPECT_TRUE(absl::StrContains(pool.status().last_action(), "scale up by 2 for " + job.id()))
      << pool.status().last_action();
  const v1::Job done = WaitForJob(token_, job.id(), v1::JOB_STATE_SUCCEEDED, 120000);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message() << server_->Stderr();
  for (const std::string& w : done.assigned_workers())
    EXPECT_TRUE(absl::StartsWith(w, "burst-w")) << w;
  std::cout << "job placed and succeeded in "
            << std::chrono::duration_cast<seconds>(steady_clock::now() - started).count() << " s\n";
  // The dear pool was never used.
  EXPECT_EQ(Get("dear").status().workers(), 0);

  // The failing and hanging provisioners: errors in the pools' status and the jobs' messages.
  v1::Pool b = WaitForPool(
      "broken", [](const v1::Pool& p) { return !p.status().last_error().empty(); }, 20);
  EXPECT_TRUE(
      absl::StrContains(b.status().last_error(), "exited with code 3: error: quota exceeded"))
      << b.status().last_error();
  v1::Job waiting = WaitForMessage(broken.id(), "quota exceeded", 20);
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_QUEUED);
  EXPECT_TRUE(absl::StrContains(waiting.message(), "pool broken cannot scale up"))
      << waiting.message();
  v1::Pool h = WaitForPool(
      "hang", [](const v1::Pool& p) { return !p.status().last_error().empty(); }, 20);
  EXPECT_TRUE(absl::StrContains(h.status().last_error(), "timed out after 2s"))
      << h.status().last_error();
  EXPECT_TRUE(h.status().has_backoff_until() ||
              h.status().last_action().find("scale up") != std::string::npos);
  EXPECT_EQ(GetJob(token_, hung.id()).state(), v1::JOB_STATE_QUEUED);

  // Idle for the idle timeout (4 s): the scale-down script stops both daemons; scale to zero.
  pool = WaitForPool(
      "burst", [](const v1::Pool& p) { return p.status().workers() == 0; }, 60);
  EXPECT_EQ(pool.status().workers(), 0) << pool.DebugString();
  EXPECT_TRUE(absl::StrContains(pool.status().last_action(), "scale down"))
      << pool.status().last_action();
  // The script waits for each daemon to exit after it disconnected.
  for (int i = 0; i < 60 && LiveDaemons() > 0; ++i) std::this_thread::sleep_for(milliseconds(250));
  EXPECT_EQ(LiveDaemons(), 0);
}

TEST_F(PoolsE2eTest, SlurmPilotsRunAGangAndGoAway) {
  // Slurm itself, private to this test.
  std::string out;
  const int rc = ChildProcess::RunToExit(
      {"/bin/sh", "-c", SlurmEnv() + " " + GANTRY_SOURCE_DIR + "/deploy/local/slurm.sh start"}, &out);
  slurm_started_ = true;
  ASSERT_EQ(rc, 0) << out;
  slurm_conf_ = std::string(absl::StripAsciiWhitespace(
      absl::StripPrefix(absl::StripAsciiWhitespace(out), "export SLURM_CONF=")));
  ASSERT_TRUE(absl::EndsWith(slurm_conf_, "slurm.conf")) << out;

  v1::PoolSpec spec;
  spec.set_price_per_device_hour(0.2);
  spec.set_max_workers(2);
  spec.set_slots_per_worker(1);
  v1::SlurmProvisioner* s = spec.mutable_provisioner()->mutable_slurm();
  s->set_server_address(server_->address());
  s->set_join_token_file(join_token_file_);
  s->set_worker_binary(GANTRY_WORKER_BINARY);
  s->set_slurm_conf(slurm_conf_);
  s->set_work_dir(dir_.path() + "/pilots");  // must exist: Slurm opens the pilots' logs there
  Output("mkdir -p " + dir_.path() + "/pilots");
  s->set_time_limit_minutes(10);
  s->set_idle_exit_seconds(5);
  s->add_daemon_args("--threads=1");
  s->add_daemon_args("--serve-port=-1");
  s->add_daemon_args("--advertise-host=127.0.0.1");
  s->add_daemon_args("--rendezvous-ports=49700-49720");

  // Slurm unreachable first: a pool pointing at a slurm.conf whose controller is not there.
  const std::string dead_conf = dir_.path() + "/dead-slurm.conf";
  Output("sed 's/^SlurmctldPort=.*/SlurmctldPort=49829/' " + slurm_conf_ + " > " + dead_conf);
  v1::PoolSpec dead = spec;
  dead.mutable_provisioner()->mutable_slurm()->set_slurm_conf(dead_conf);
  dead.mutable_provisioner()->mutable_slurm()->set_timeout_seconds(15);
  ASSERT_TRUE(Create("offline", dead).ok());
  const v1::Job stuck = SubmitJob(token_, Spec("offline"));
  v1::Pool offline = WaitForPool(
      "offline", [](const v1::Pool& p) { return !p.status().last_error().empty(); }, 40);
  EXPECT_TRUE(absl::StrContains(offline.status().last_error(), "Slurm: sbatch") ||
              absl::StrContains(offline.status().last_error(), "sbatch timed out"))
      << offline.status().last_error();
  std::cout << "unreachable Slurm: " << offline.status().last_error() << "\n";
  v1::DeletePoolRequest del;
  del.set_name("offline");
  v1::DeletePoolResponse deleted;
  v1::CancelJobRequest cancel;
  cancel.set_job_id(stuck.id());
  v1::Job cancelled;
  EXPECT_TRUE(training_->CancelJob(Ctx(token_).get(), cancel, &cancelled).ok());
  EXPECT_TRUE(admin_->DeletePool(Ctx(admin_token_).get(), del, &deleted).ok());

  // The empty hpc pool and a gang of two.
  ASSERT_TRUE(Create("hpc", spec).ok());
  EXPECT_EQ(Get("hpc").status().workers(), 0);
  const auto started = steady_clock::now();
  const v1::Job job = SubmitJob(token_, Spec("hpc"));
  // Pilots appear in squeue.
  std::string queue;
  for (int i = 0; i < 120; ++i) {
    queue = Output("SLURM_CONF=" + slurm_conf_ + " squeue -h -r -n gantry-pilot-hpc -o '%i %T'");
    if (std::count(queue.begin(), queue.end(), '\n') >= 2) break;
    std::this_thread::sleep_for(milliseconds(250));
  }
  EXPECT_GE(std::count(queue.begin(), queue.end(), '\n'), 2) << queue << server_->Stderr();
  std::cout << "squeue:\n" << queue;
  const v1::Job done = WaitForJob(token_, job.id(), v1::JOB_STATE_SUCCEEDED, 120000);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message() << server_->Stderr();
  for (const std::string& w : done.assigned_workers()) {
    EXPECT_TRUE(absl::StartsWith(w, "hpc-pilot-")) << w;
  }
  std::cout << "job succeeded after "
            << std::chrono::duration_cast<seconds>(steady_clock::now() - started).count() << " s\n";
  // The pilots go away afterwards (idle exit after 5 s, or scancel by the autoscaler).
  for (int i = 0; i < 120; ++i) {
    queue = Output("SLURM_CONF=" + slurm_conf_ + " squeue -h -r -n gantry-pilot-hpc -o '%i %T'");
    if (queue.empty()) break;
    std::this_thread::sleep_for(milliseconds(500));
  }
  EXPECT_EQ(queue, "") << server_->Stderr();
  v1::Pool pool = WaitForPool(
      "hpc", [](const v1::Pool& p) { return p.status().workers() == 0; }, 30);
  EXPECT_EQ(pool.status().workers(), 0);
  EXPECT_EQ(pool.status().last_error(), "");
}

}  // namespace
}  // namespace gantry::testing
