// End to end for `gantry generate`: a real gantry-server on a fresh PostgreSQL database, one real
// gantry-worker daemon (serving on, as by default) and a tiny 3DGAN trained and registered through
// the API; the `gantry` binary streams showers into HDF5 and .npy files, which are read back with
// showers::ReadShowerFile. Checks the layout, the conditions, determinism by seed, the progress
// lines on a pipe, --quiet, and that refused requests leave no file behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "showers/hdf5_io.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using ::testing::HasSubstr;

using ::gantry::testing::Exists;
using ::gantry::testing::ReadFile;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

class CliGenerateE2eTest : public ServerFixture {
 protected:
  // One daemon and one trained model for all tests of the suite would be faster, but the fixture
  // owns a fresh database per test; the suite has a single test body with several steps instead.
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file_, "cli-gen-join-token-0123456789abcdef\n");
    StartServer({"--join-token-file", join_token_file_, "--heartbeat-interval-ms", "300"});
    token_ = NewTenant("physics");
    worker_process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{GANTRY_WORKER_BINARY, "daemon", "--server=" + server_->address(),
                                 "--join-token-file=" + join_token_file_, "--name=gen-worker",
                                 "--slots=1", "--threads=1", "--cache-dir=" + dir_.path() + "/wc",
                                 "--advertise-host=127.0.0.1", "--rendezvous-ports=29880-29899"},
        dir_.path() + "/worker.log");
    ASSERT_GT(worker_process_->pid(), 0);
  }

  void TearDown() override {
    worker_process_.reset();
    ServerFixture::TearDown();
  }

  // Runs the gantry binary as the tenant, stdout and stderr kept apart (stderr is a pipe-like
  // file, not a terminal).
  Result Gantry(const std::vector<std::string>& args) {
    const std::string out = dir_.path() + "/cmd.out", err = dir_.path() + "/cmd.err";
    std::string command = std::string("exec '") + GANTRY_CLI_BINARY + "' --server " +
                          server_->address() + " --token " + token_;
    for (const std::string& a : args) command += " '" + a + "'";
    command += " >" + out + " 2>" + err + " </dev/null";
    ChildProcess child({"/bin/sh", "-c", command}, dir_.path() + "/cmd.log");
    Result r;
    r.exit_code = child.Wait(120000);
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  // Trains the tiny preset for one epoch on toy showers of 20-200 GeV and returns its model ref.
  std::string TrainTinyModel() {
    v1::JobSpec spec;
    spec.set_display_name("gen-tiny");
    spec.set_model_preset("tiny");
    spec.set_dataset("toymc:layout=25,events=32,seed=5,emin=20,emax=200");
    spec.mutable_hyper_parameters()->set_epochs(1);
    spec.mutable_hyper_parameters()->set_batch_per_rank(8);
    spec.mutable_hyper_parameters()->set_seed(3);
    spec.set_world_size(1);
    spec.mutable_validation()->set_disabled(true);
    v1::Job job = SubmitJob(token_, spec);
    job = WaitForJob(token_, job.id(), v1::JOB_STATE_SUCCEEDED, 240000);
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << worker_process_->Log();
    return job.model_ref();
  }

  std::string join_token_file_;
  std::string token_;
  std::unique_ptr<ChildProcess> worker_process_;
};

TEST_F(CliGenerateE2eTest, WritesHdf5AndNpyDeterministically) {
  const std::string model = TrainTinyModel();
  ASSERT_FALSE(model.empty());

  // The form, into HDF5: the fixed-angle 3DGAN layout with the conditions used.
  const std::string a = dir_.path() + "/a.h5";
  Result first = Gantry({"generate", model, "--energy", "50:150", "--count", "150", "--seed", "42",
                         "--chunk", "32", "--out", a});
  ASSERT_EQ(first.exit_code, 0) << first.err << worker_process_->Log() << server_->Stderr();
  EXPECT_THAT(first.out, HasSubstr("generated 150 showers of shape 150x25x25x25 from " + model +
                                   " (seed 42) -> " + a));
  EXPECT_FALSE(Exists(a + ".part"));
  absl::StatusOr<showers::ShowerSet> set = showers::ReadShowerFile(a);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->layout, showers::Layout::kFixedAngle3DGan);
  ASSERT_EQ(set->events(), 150);
  EXPECT_EQ(set->particle, "Ele");
  double deposit = 0;
  for (float v : set->cells) deposit += v;
  EXPECT_GT(deposit, 0.0);
  for (float e : set->energy_gev) {
    EXPECT_GE(e, 50.0f);
    EXPECT_LE(e, 150.0f);
  }
  // Not piped to a terminal: progress comes as whole lines ending in the final count.
  EXPECT_THAT(first.err, HasSubstr("150/150 showers"));
  EXPECT_EQ(first.err.find('\r'), std::string::npos);
  EXPECT_EQ(first.err.back(), '\n');

  // The same seed gives the same showers, whatever the chunking; another seed does not.
  const std::string b = dir_.path() + "/b.h5", c = dir_.path() + "/c.h5";
  ASSERT_EQ(Gantry({"generate", model, "--energy", "50:150", "--count", "150", "--seed", "42",
                    "--quiet", "--out", b})
                .exit_code,
            0);
  absl::StatusOr<showers::ShowerSet> same = showers::ReadShowerFile(b);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->energy_gev, set->energy_gev);
  EXPECT_EQ(same->cells, set->cells);
  Result other = Gantry(
      {"generate", model, "--energy", "50:150", "--count", "150", "--seed", "43", "--out", c});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(showers::ReadShowerFile(c)->cells, set->cells);

  // --quiet: nothing on stderr. A list of energies into .npy: the exact conditions, in order.
  const std::string npy = dir_.path() + "/list.npy";
  Result quiet = Gantry({"generate", model, "--energy", "30", "--energy", "120", "--energy", "60",
                         "--seed", "5", "--quiet", "--out", npy});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  const std::string bytes = ReadFile(npy);
  ASSERT_GT(bytes.size(), 128u);
  EXPECT_THAT(bytes.substr(0, 128), HasSubstr("'shape': (3, 25, 25, 25)"));
  EXPECT_EQ(bytes.size() % 64, (3 * 25 * 25 * 25 * 4) % 64);

  // Without --energy: the model's training range (20-200 GeV) is used.
  const std::string d = dir_.path() + "/default.h5";
  ASSERT_EQ(Gantry({"generate", model, "--count", "40", "--quiet", "--out", d}).exit_code, 0);
  absl::StatusOr<showers::ShowerSet> ranged = showers::ReadShowerFile(d);
  ASSERT_TRUE(ranged.ok());
  for (float e : ranged->energy_gev) {
    EXPECT_GE(e, 20.0f);
    EXPECT_LE(e, 200.0f);
  }

  // Refused by the server: exit 1, the range named, no file and no .part left.
  const std::string refused = dir_.path() + "/refused.h5";
  Result outside =
      Gantry({"generate", model, "--energy", "10:500", "--count", "10", "--out", refused});
  EXPECT_EQ(outside.exit_code, 1);
  EXPECT_THAT(outside.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(outside.err, HasSubstr("training range"));
  EXPECT_FALSE(Exists(refused));
  EXPECT_FALSE(Exists(refused + ".part"));
  Result unknown = Gantry({"generate", "nope:1", "--energy", "100", "--out", refused});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
  EXPECT_FALSE(Exists(refused + ".part"));
}

}  // namespace
}  // namespace gantry::testing
