// End to end generation: a real gantry-server on a fresh PostgreSQL database and a real
// gantry-worker daemon (serving on, its default) that first trains a tiny 3DGAN for one epoch
// (so the registered checkpoint is a real generator with a real training range), then serves it:
// Generate goes client -> server (resolution, access, router) -> worker (model cache, dynamic
// batcher, LibTorch) -> back, chunk by chunk.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/generation.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/child_process.h"

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
    std::ofstream(join_token_file_) << "e2e-gen-join-token-0123456789abcdef\n";
    StartServer({"--join-token-file", join_token_file_, "--heartbeat-interval-ms", "300",
                 "--lease-timeout-ms", "3000"});
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
    job = WaitForJob(token_, job.id(), v1::SUCCEEDED, 300000);
    EXPECT_EQ(job.state(), v1::SUCCEEDED) << job.DebugString() << Logs();
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
  // Batched together with others or alone, a request's showers are the same.
  for (int i : {0, kClients - 1}) {
    Generated alone = Generate(token_, ListRequest(energies, 1000 + i));
    ASSERT_TRUE(alone.status.ok()) << Describe(alone.status);
    EXPECT_EQ(alone.Bytes(), concurrent[i].Bytes()) << "client " << i;
  }
}

}  // namespace
}  // namespace gantry::testing
