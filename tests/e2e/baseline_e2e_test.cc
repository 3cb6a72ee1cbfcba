// End to end baseline: a real gantry-server on a fresh PostgreSQL database and a real gantry-worker
// daemon fit a no-network baseline (preset baseline-spots) as a job: its rank fits the template,
// modes and spot energy to toy Monte Carlo, uploads the baseline's checkpoint and validates it; the
// server registers it like any model; Generate is served by the worker from the baseline; export
// is refused (no network).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/generation.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class BaselineE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file_, "e2e-baseline-join-token-0123456789abcdef\n");
    StartServer({"--join-token-file", join_token_file_, "--heartbeat-interval-ms", "300",
                 "--lease-timeout-ms", "8000"});
    token_ = NewTenant("physics");
    std::vector<std::string> argv = {GANTRY_WORKER_BINARY,
                                     "daemon",
                                     "--server=" + server_->address(),
                                     "--join-token-file=" + join_token_file_,
                                     "--name=b1",
                                     "--slots=1",
                                     "--threads=1",
                                     "--cache-dir=" + dir_.path() + "/b1",
                                     "--advertise-host=127.0.0.1",
                                     "--rendezvous-ports=29730-29740"};
    worker_process_ = std::make_unique<ChildProcess>(argv, dir_.path() + "/b1.log");
    ASSERT_GT(worker_process_->pid(), 0);
  }

  void TearDown() override {
    worker_process_.reset();
    ServerFixture::TearDown();
  }

  std::string Logs() {
    return "--- b1\n" + worker_process_->Log() + "--- server\n" + server_->Stderr();
  }

  // Generate's status and every chunk's cells.
  grpc::Status Generate(const v1::GenerateRequest& request, std::vector<float>* cells) {
    auto ctx = Ctx(token_, 120000);
    auto reader = generation_->Generate(ctx.get(), request);
    v1::GenerateChunk chunk;
    while (reader->Read(&chunk)) {
      const size_t at = cells->size();
      cells->resize(at + chunk.showers().size() / 4);
      std::memcpy(cells->data() + at, chunk.showers().data(), chunk.showers().size());
    }
    return reader->Finish();
  }

  std::string join_token_file_;
  std::string token_;
  std::unique_ptr<ChildProcess> worker_process_;
};

TEST_F(BaselineE2eTest, ABaselineIsFittedRegisteredAndServed) {
  v1::JobSpec spec;
  spec.set_model_name("spots");
  spec.set_model_preset("baseline-spots");
  spec.set_dataset("toymc:layout=25,events=300,seed=5,emin=20,emax=200");
  spec.mutable_hyper_parameters()->set_seed(3);  // no epochs or batch: a baseline has no steps
  spec.set_world_size(1);
  v1::Job job = SubmitJob(token_, spec);
  ASSERT_FALSE(job.id().empty());
  job = WaitForJob(token_, job.id(), v1::JOB_STATE_SUCCEEDED, 240000);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
  ASSERT_EQ(job.model_ref(), "spots:1");

  // Registered like a trained model: lineage, validation metrics against the hold-out, BF16 off.
  v1::GetModelRequest get;
  get.set_model("spots:1");
  v1::ModelVersion model;
  ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok());
  EXPECT_EQ(model.lineage().model_preset(), "baseline-spots");
  EXPECT_EQ(model.lineage().hyper_parameters().at("baseline"), "baseline-spots");
  EXPECT_EQ(model.lineage().hyper_parameters().at("baseline_modes"), "2");
  EXPECT_GT(std::stod(model.lineage().hyper_parameters().at("baseline_spot_gev")), 0);
  ASSERT_TRUE(model.metrics().count("fom")) << model.DebugString();
  std::cout << "baseline-spots: " << job.message() << "; mre_sampling_fraction "
            << model.metrics().at("mre_sampling_fraction") << ", eprof "
            << model.metrics().at("eprof") << " (null " << model.metrics().at("eprof_null")
            << ")\n";
  EXPECT_TRUE(std::isfinite(model.metrics().at("fom")));
  // The template matches the data's sampling fraction: the worst energy bin within 10%.
  EXPECT_LT(model.metrics().at("mre_sampling_fraction"), 0.1) << model.DebugString();
  EXPECT_EQ(model.bf16().state(), v1::Bf16Check::STATE_UNAVAILABLE);
  EXPECT_GE(model.energy_range_gev().min(), 20.0);

  // Served from the baseline: showers with energy, the same for the same seed.
  v1::GenerateRequest request;
  request.set_model("spots:1");
  for (double e : {30.0, 100.0, 180.0}) request.mutable_list()->add_items()->set_energy_gev(e);
  request.set_seed(7);
  std::vector<float> first, again, other;
  grpc::Status status = Generate(request, &first);
  ASSERT_TRUE(status.ok()) << Describe(status) << "\n" << Logs();
  ASSERT_EQ(first.size(), 3u * 25 * 25 * 25);
  for (int s = 0; s < 3; ++s) {
    double sum = 0;
    for (int c = 0; c < 25 * 25 * 25; ++c) sum += first[s * 25 * 25 * 25 + c];
    EXPECT_GT(sum, 0.005 * request.list().items(s).energy_gev()) << "shower " << s;
  }
  ASSERT_TRUE(Generate(request, &again).ok());
  EXPECT_EQ(again, first);
  request.set_seed(8);
  ASSERT_TRUE(Generate(request, &other).ok());
  EXPECT_NE(other, first);
  // BF16 is refused by the registry's verdict.
  request.set_precision(v1::PRECISION_BF16);
  std::vector<float> refused;
  EXPECT_EQ(Generate(request, &refused).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // No network to export.
  v1::ExportModelRequest export_request;
  export_request.set_model("spots:1");
  export_request.set_format(v1::EXPORT_FORMAT_ONNX);
  auto ctx = Ctx(token_, 60000);
  auto reader = catalog_->ExportModel(ctx.get(), export_request);
  v1::ExportModelChunk chunk;
  while (reader->Read(&chunk)) {
  }
  const grpc::Status exported = reader->Finish();
  EXPECT_EQ(exported.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(exported);
  EXPECT_NE(exported.error_message().find("baseline"), std::string::npos) << Describe(exported);
}

// Leave one energy band out: the fit skips 80-120 GeV, the validation scores that band and a
// trained band of the same width beside it on held-out events alone; the lineage records both.
// A band outside the dataset's energies fails the job with a message that says what to change.
TEST_F(BaselineE2eTest, ALeftOutEnergyBandIsSkippedAndScoredBesideAControl) {
  v1::JobSpec spec;
  spec.set_model_name("spots-loo");
  spec.set_model_preset("baseline-spots");
  spec.set_dataset("toymc:layout=25,events=600,seed=6,emin=20,emax=200");
  spec.mutable_hyper_parameters()->set_seed(3);
  spec.set_world_size(1);
  spec.mutable_validation()->set_holdout_fraction(0.3);
  spec.mutable_validation()->mutable_leave_out()->set_centre_gev(100);
  spec.mutable_validation()->mutable_leave_out()->set_half_width_gev(20);
  v1::Job job = SubmitJob(token_, spec);
  ASSERT_FALSE(job.id().empty());
  job = WaitForJob(token_, job.id(), v1::JOB_STATE_SUCCEEDED, 240000);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
  v1::GetModelRequest get;
  get.set_model(job.model_ref());
  v1::ModelVersion model;
  ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok());
  const auto& hp = model.lineage().hyper_parameters();
  EXPECT_EQ(hp.at("left_out_energy_gev"), "80-120");
  EXPECT_EQ(hp.at("left_out_control_energy_gev"), "140-180");
  const auto& m = model.metrics();
  for (const char* key : {"left_out_fom", "left_out_fom_null", "left_out_mre_sampling_fraction",
                          "left_out_control_fom", "left_out_control_fom_null", "fom"}) {
    ASSERT_TRUE(m.count(key)) << key << "\n" << model.DebugString();
    EXPECT_TRUE(std::isfinite(m.at(key))) << key;
  }
  // About 30% of the ~130 events in each 40 GeV band are held out; each band is scored alone.
  EXPECT_GE(m.at("left_out_holdout_events"), 10);
  EXPECT_LT(m.at("left_out_holdout_events"), m.at("holdout_events"));
  EXPECT_GE(m.at("left_out_control_holdout_events"), 10);
  v1::GetJobLogsRequest logs_request;
  logs_request.set_job_id(job.id());
  logs_request.set_rank(-1);
  v1::GetJobLogsResponse logs;
  ASSERT_TRUE(training_->GetJobLogs(Ctx(token_).get(), logs_request, &logs).ok());
  std::string log;
  for (const v1::LogLine& line : logs.lines()) log += line.text() + "\n";
  EXPECT_NE(log.find("leave-out: "), std::string::npos) << log;
  EXPECT_NE(log.find("training events in 80-120 GeV skipped"), std::string::npos) << log;
  std::cout << "baseline-spots leaving out 80-120 GeV: fom there " << m.at("left_out_fom")
            << " (MC floor " << m.at("left_out_fom_null") << "), in the trained 140-180 GeV "
            << m.at("left_out_control_fom") << " (floor " << m.at("left_out_control_fom_null")
            << ")\n";

  // A band reaching past the data's 200 GeV: the rank refuses it, the job fails and says why.
  spec.set_model_name("spots-edge");
  spec.mutable_validation()->mutable_leave_out()->set_centre_gev(195);
  v1::Job edge = SubmitJob(token_, spec);
  edge = WaitForJob(token_, edge.id(), v1::JOB_STATE_FAILED, 240000);
  ASSERT_EQ(edge.state(), v1::JOB_STATE_FAILED) << edge.DebugString() << Logs();
  EXPECT_NE(edge.message().find("must lie inside the dataset's energies"), std::string::npos)
      << edge.DebugString();
}

}  // namespace
}  // namespace gantry::testing
