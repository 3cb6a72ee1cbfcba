// End to end generation: a real gantry-server on a fresh PostgreSQL database and a real
// gantry-worker daemon (serving on, its default) that first trains a tiny 3DGAN for one epoch
// (so the registered checkpoint is a real generator with a real training range), then serves it:
// Generate goes client -> server (resolution, access, router) -> worker (model cache, dynamic
// batcher, LibTorch) -> back, chunk by chunk.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/generation.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/serving/shower_compare.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using std::chrono::seconds;
using std::chrono::steady_clock;

// What a Generate call returned.
struct Generated {
  grpc::Status status;
  std::vector<v1::GenerateChunk> chunks;
  std::string seed;  // initial metadata gantry-seed
  // Every chunk's showers, concatenated.
  std::string Bytes() const {
    std::string all;
    for (const auto& c : chunks) all += c.showers();
    return all;
  }
  // The same, as floats.
  std::vector<float> Cells() const {
    const std::string all = Bytes();
    std::vector<float> cells(all.size() / sizeof(float));
    std::memcpy(cells.data(), all.data(), cells.size() * sizeof(float));
    return cells;
  }
  int64_t Showers() const {
    int64_t n = 0;
    for (const auto& c : chunks) n += c.shape(0);
    return n;
  }
};

class GenerationE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file_, "e2e-gen-join-token-0123456789abcdef\n");
    // No model cache: a test changes a version's BF16 verdict in the database.
    StartServer({"--join-token-file", join_token_file_, "--heartbeat-interval-ms", "300",
                 "--lease-timeout-ms", "8000", "--model_cache_ttl_ms=0"});
    token_ = NewTenant("physics");
    StartWorker();
    model_ref_ = TrainTinyModel();
  }

  void TearDown() override {
    worker_process_.reset();
    ServerFixture::TearDown();
  }

  // One daemon with one slot and one thread; serving is on by default (ephemeral port).
  void StartWorker() {
    std::vector<std::string> argv = {GANTRY_WORKER_BINARY,
                                     "daemon",
                                     "--server=" + server_->address(),
                                     "--join-token-file=" + join_token_file_,
                                     "--name=g1",
                                     "--slots=1",
                                     "--threads=1",
                                     "--cache-dir=" + dir_.path() + "/g1",
                                     "--advertise-host=127.0.0.1",
                                     "--rendezvous-ports=29700-29720"};
    worker_process_ = std::make_unique<ChildProcess>(argv, dir_.path() + "/g1.log");
    ASSERT_GT(worker_process_->pid(), 0);
  }

  std::string Logs() {
    return "--- g1\n" + worker_process_->Log() + "--- server\n" + server_->Stderr();
  }

  // A one-rank, one-epoch job of the tiny preset on toy Monte Carlo of 20..200 GeV; returns the
  // registered model's reference.
  std::string TrainTinyModel() {
    v1::JobSpec spec;
    spec.set_display_name("gen-e2e");
    spec.set_model_name("gen-tiny");
    spec.set_model_preset("tiny");
    spec.set_dataset("toymc:layout=25,events=32,seed=5,emin=20,emax=200");
    spec.mutable_hyper_parameters()->set_epochs(1);
    spec.mutable_hyper_parameters()->set_batch_per_rank(8);
    spec.mutable_hyper_parameters()->set_seed(3);
    spec.set_world_size(1);
    v1::Job job = SubmitJob(token_, spec);
    job = WaitForJob(token_, job.id(), v1::JOB_STATE_SUCCEEDED, 300000);
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
    return job.model_ref();
  }

  v1::GenerateRequest ListRequest(std::vector<double> energies, uint64_t seed, int chunk = 0) {
    v1::GenerateRequest r;
    r.set_model(model_ref_);
    for (double e : energies) r.mutable_list()->add_items()->set_energy_gev(e);
    r.set_seed(seed);
    r.set_chunk_showers(chunk);
    return r;
  }

  Generated Generate(const std::string& token, const v1::GenerateRequest& request) {
    Generated g;
    auto ctx = Ctx(token, 120000);
    auto reader = generation_->Generate(ctx.get(), request);
    v1::GenerateChunk chunk;
    while (reader->Read(&chunk)) g.chunks.push_back(chunk);
    g.status = reader->Finish();
    auto md = ctx->GetServerInitialMetadata();
    auto it = md.find("gantry-seed");
    if (it != md.end()) g.seed.assign(it->second.data(), it->second.size());
    return g;
  }

  std::string join_token_file_;
  std::string token_;
  std::string model_ref_;
  std::unique_ptr<ChildProcess> worker_process_;
};

TEST_F(GenerationE2eTest, AWorkerServesTheTrainedModelThroughTheServer) {
  ASSERT_EQ(model_ref_, "gen-tiny:1");
  v1::GetModelRequest get;
  get.set_model(model_ref_);
  v1::ModelVersion model;
  ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok());
  const double emin = model.energy_range_gev().min(), emax = model.energy_range_gev().max();
  ASSERT_GE(emin, 20.0);
  ASSERT_LE(emax, 200.0);
  ASSERT_LT(emin, emax);

  // Shapes, order and the conditions of a list.
  const std::vector<double> energies = {emin, (emin + emax) / 2, emax};
  Generated g = Generate(token_, ListRequest(energies, 7, 2));
  ASSERT_TRUE(g.status.ok()) << Describe(g.status) << "\n" << Logs();
  EXPECT_EQ(g.seed, "7");
  ASSERT_EQ(g.chunks.size(), 2u);
  int64_t offset = 0;
  for (const v1::GenerateChunk& c : g.chunks) {
    ASSERT_EQ(c.shape_size(), 4);
    EXPECT_EQ(c.shape(1), 25);
    EXPECT_EQ(c.shape(2), 25);
    EXPECT_EQ(c.shape(3), 25);
    EXPECT_EQ(c.offset(), offset);
    EXPECT_EQ(c.model_ref(), "gen-tiny:1");
    ASSERT_EQ(c.conditions_size(), c.shape(0));
    ASSERT_EQ(c.showers().size(), static_cast<size_t>(c.shape(0)) * 25 * 25 * 25 * 4);
    for (int i = 0; i < c.conditions_size(); ++i) {
      EXPECT_DOUBLE_EQ(c.conditions(i).energy_gev(), energies[offset + i]);
    }
    std::vector<float> cells(c.showers().size() / 4);
    std::memcpy(cells.data(), c.showers().data(), c.showers().size());
    double sum = 0;
    for (float x : cells) {
      ASSERT_TRUE(std::isfinite(x));
      sum += x;
    }
    EXPECT_GT(sum, 0.0) << "a generated chunk deposits no energy";
    offset += c.shape(0);
  }
  EXPECT_EQ(offset, 3);

  // Same seed, same model, same conditions: the same bytes; another seed: other showers.
  Generated again = Generate(token_, ListRequest(energies, 7, 0));
  ASSERT_TRUE(again.status.ok()) << Describe(again.status);
  EXPECT_EQ(again.Bytes(), g.Bytes()) << "the chunk size must not change the showers";
  Generated other = Generate(token_, ListRequest(energies, 8, 0));
  ASSERT_TRUE(other.status.ok()) << Describe(other.status);
  EXPECT_NE(other.Bytes(), g.Bytes());

  // A range: the drawn conditions lie inside it; a drawn seed is returned.
  v1::GenerateRequest range;
  range.set_model("gen-tiny:1");
  range.mutable_range()->mutable_energy_gev()->set_min(emin);
  range.mutable_range()->mutable_energy_gev()->set_max(emax);
  range.mutable_range()->set_count(100);
  Generated drawn = Generate(token_, range);
  ASSERT_TRUE(drawn.status.ok()) << Describe(drawn.status);
  EXPECT_EQ(drawn.Showers(), 100);
  EXPECT_FALSE(drawn.seed.empty());
  EXPECT_NE(drawn.seed, "0");
  for (const auto& c : drawn.chunks) {
    for (const v1::Condition& cond : c.conditions()) {
      EXPECT_GE(cond.energy_gev(), emin);
      EXPECT_LE(cond.energy_gev(), emax);
    }
  }

  // Outside the training range: INVALID_ARGUMENT naming it.
  Generated far = Generate(token_, ListRequest({emax + 100}, 1));
  EXPECT_EQ(far.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(far.status);
  EXPECT_NE(far.status.error_message().find("training range of gen-tiny:1"), std::string::npos)
      << far.status.error_message();

  // Another tenant cannot see the model.
  const std::string other_tenant = NewTenant("chemistry");
  Generated hidden = Generate(other_tenant, ListRequest({emin}, 1));
  EXPECT_EQ(hidden.status.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(hidden.status);
}

TEST_F(GenerationE2eTest, ConcurrentClientsGetDistinctResultsEqualToTheirSequentialOnes) {
  ASSERT_EQ(model_ref_, "gen-tiny:1");
  constexpr int kClients = 8;
  const std::vector<double> energies = {50, 100, 150};
  std::vector<Generated> concurrent(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back(
        [&, i] { concurrent[i] = Generate(token_, ListRequest(energies, 1000 + i)); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(concurrent[i].status.ok()) << i << ": " << Describe(concurrent[i].status) << "\n"
                                           << Logs();
    ASSERT_EQ(concurrent[i].Showers(), 3);
    for (int j = 0; j < i; ++j) {
      EXPECT_NE(concurrent[i].Bytes(), concurrent[j].Bytes()) << "clients " << i << " and " << j;
    }
  }
  // Batched together with others or alone, a request's showers are the same up to rounding (the
  // served guarantee: 1e-4 of a shower's largest cell; bit for bit on AVX-512 CPUs).
  for (int i : {0, kClients - 1}) {
    Generated alone = Generate(token_, ListRequest(energies, 1000 + i));
    ASSERT_TRUE(alone.status.ok()) << Describe(alone.status);
    EXPECT_LE(serving::testing::WorstRelativeDifference(alone.Cells(), concurrent[i].Cells()), 1e-4)
        << "client " << i;
  }
}

TEST_F(GenerationE2eTest, Bf16IsServedAsTheRegistryDecided) {
  ASSERT_EQ(model_ref_, "gen-tiny:1");
  // The training worker ran the guard on its final validation (this machine has AVX512-BF16; on
  // one without it the check is "not checked" with the hardware reason).
  v1::GetModelRequest get;
  get.set_model(model_ref_);
  v1::ModelVersion model;
  ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok());
  EXPECT_NE(model.bf16().state(), v1::Bf16Check::STATE_UNSPECIFIED) << Logs();
  EXPECT_FALSE(model.bf16().reason().empty()) << model.bf16().DebugString();
  std::cout << "registered BF16 verdict: " << model.bf16().ShortDebugString() << "\n";
  if (model.bf16().state() == v1::Bf16Check::STATE_NOT_CHECKED &&
      model.bf16().reason().find("lacks AVX512-BF16/AMX") != std::string::npos) {
    return;  // no bfloat16 on this worker: tests/serving covers the refusal
  }
  // Serve it in BF16 whatever the guard said of this barely trained model, then refuse it.
  db_.Query("UPDATE models SET bf16_state = 'STATE_AVAILABLE' WHERE name = 'gen-tiny'");
  const std::vector<double> energies = {50, 100, 150, 200};
  v1::GenerateRequest bf16 = ListRequest(energies, 11);
  bf16.set_precision(v1::PRECISION_BF16);
  Generated a = Generate(token_, ListRequest(energies, 11));
  Generated b = Generate(token_, bf16);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  ASSERT_TRUE(b.status.ok()) << Describe(b.status) << "\n" << Logs();
  ASSERT_EQ(b.Showers(), 4);
  const std::string fa = a.Bytes(), fb = b.Bytes();
  ASSERT_EQ(fb.size(), fa.size()) << "BF16 showers come back as float32";
  EXPECT_NE(fa, fb) << "BF16 gave FP32's bits";
  // Each shower's energy sum and each cell within 5% of FP32 (sum) and of the shower's peak (the
  // tolerances of tests/serving, where they are explained).
  constexpr size_t kCells = 25 * 25 * 25;
  std::vector<float> x(fa.size() / 4), y(fb.size() / 4);
  std::memcpy(x.data(), fa.data(), fa.size());
  std::memcpy(y.data(), fb.data(), fb.size());
  int compared = 0;
  for (size_t s = 0; s < x.size(); s += kCells) {
    double sx = 0, sy = 0, peak = 0, diff = 0;
    for (size_t i = s; i < s + kCells; ++i) {
      sx += x[i];
      sy += y[i];
      peak = std::max({peak, std::abs(double{x[i]}), std::abs(double{y[i]})});
      diff = std::max(diff, std::abs(double{x[i]} - double{y[i]}));
    }
    if (sx == 0) continue;  // a barely trained model leaves some showers empty
    ++compared;
    EXPECT_LE(std::abs(sx - sy) / sx, 0.05) << "shower " << s / kCells;
    EXPECT_LE(diff / peak, 0.05) << "shower " << s / kCells;
  }
  EXPECT_GT(compared, 0) << "every FP32 shower was empty";

  db_.Query(
      "UPDATE models SET bf16_state = 'STATE_UNAVAILABLE', bf16_reason = 'eprof is 0.5 in BF16 "
      "against "
      "0.1 in FP32' WHERE name = 'gen-tiny'");
  Generated refused = Generate(token_, bf16);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << Describe(refused.status);
  EXPECT_NE(refused.status.error_message().find(
                "BF16 is unavailable for gen-tiny:1: eprof is 0.5 in BF16 against 0.1 in FP32; use "
                "PRECISION_FP32"),
            std::string::npos)
      << refused.status.error_message();
  ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok());
  EXPECT_EQ(model.bf16().state(), v1::Bf16Check::STATE_UNAVAILABLE);
  EXPECT_TRUE(Generate(token_, ListRequest(energies, 11)).status.ok()) << "FP32 is still served";
}

}  // namespace
}  // namespace gantry::testing
