// GenerationFixture: a ServerFixture whose server accepts workers (join token, fast heartbeats),
// with a tenant "physics" owning model calo:1 (alias calo@prod, electrons of 10..100 GeV)
// registered through the worker protocol, and helpers to add generation workers (a
// FakeGenerationWorker behind a DriverWorker) and to call Generate. Shared by the generation tests
// and the overhead benchmark.
#ifndef GANTRY_TESTS_SERVER_GENERATION_FIXTURE_H_
#define GANTRY_TESTS_SERVER_GENERATION_FIXTURE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/driver_worker.h"
#include "tests/server/fake_generation_worker.h"
#include "tests/server/server_fixture.h"

namespace gantry::testing {

// What a Generate call returned.
struct Generated {
  grpc::Status status;
  std::vector<v1::GenerateChunk> chunks;
  std::string seed;    // initial metadata gantry-seed
  std::string worker;  // initial metadata gantry-worker
  int64_t showers() const {
    int64_t n = 0;
    for (const auto& c : chunks) n += c.shape(0);
    return n;
  }
};

inline std::string MetadataValue(const std::multimap<grpc::string_ref, grpc::string_ref>& md,
                                 const std::string& key) {
  auto it = md.find(key);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

class GenerationFixture : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    RestartServer({"--max-showers-per-request", "100000"});
    token_ = NewTenant("physics");
    sha_ = RegisterModel(token_, "calo", std::string(3000, 'c'));
    v1::SetAliasRequest alias;
    alias.set_name("calo");
    alias.set_alias("prod");
    alias.set_version(1);
    v1::ModelVersion model;
    grpc::Status s = catalog_->SetAlias(Ctx(token_).get(), alias, &model);
    ASSERT_TRUE(s.ok()) << Describe(s);
  }

  // Restarts the server with the join token, fast heartbeats and `extra` flags.
  void RestartServer(const std::vector<std::string>& extra) {
    StopServer();
    std::vector<std::string> args = WorkerProtocolArgs(join_);
    args.insert(args.end(), extra.begin(), extra.end());
    StartServer(args);
  }

  // Runs a one-rank job of `owner_token` to success through the worker protocol, the rank
  // uploading `checkpoint`; returns the checkpoint's sha256. The model is name:1, trained on
  // electrons of 10..100 GeV (and angles of 1..2 rad when `variable_angle`).
  std::string RegisterModel(const std::string& owner_token, const std::string& name,
                            const std::string& checkpoint, bool variable_angle = false) {
    DriverWorker trainer(channel_, join_, "trainer-" + name, 1);
    EXPECT_TRUE(trainer.status().ok()) << Describe(trainer.status());
    v1::JobSpec spec = GoodSpec();
    spec.set_world_size(1);
    spec.set_model_name(name);
    v1::Job job = SubmitJob(owner_token, spec);
    std::optional<v1::ServerMessage> m = trainer.Next();
    EXPECT_TRUE(m && m->has_assignment());
    if (!m || !m->has_assignment()) return "";
    trainer.set_free_slots(0);
    trainer.RankStatus(job.id(), 0, v1::RANK_PHASE_RUNNING);
    EXPECT_EQ(WaitForJob(owner_token, job.id(), v1::JOB_STATE_RUNNING, 10000).state(),
              v1::JOB_STATE_RUNNING);
    const std::string sha = UploadCheckpoint(channel_, trainer.credential(), job.id(), checkpoint);
    v1::WorkerMessage result;
    v1::JobResult* res = result.mutable_result();
    res->set_success(true);
    res->set_checkpoint_sha256(sha);
    res->set_checkpoint_size_bytes(checkpoint.size());
    res->mutable_energy_range_gev()->set_min(10);
    res->mutable_energy_range_gev()->set_max(100);
    res->set_particle(v1::PARTICLE_ELECTRON);
    if (variable_angle) {
      res->mutable_theta_range_rad()->set_min(1);
      res->mutable_theta_range_rad()->set_max(2);
    }
    trainer.Send(job.id(), result);
    EXPECT_EQ(WaitForJob(owner_token, job.id(), v1::JOB_STATE_SUCCEEDED, 10000).state(),
              v1::JOB_STATE_SUCCEEDED);
    trainer.RankStatus(job.id(), 0, v1::RANK_PHASE_EXITED);
    return sha;
  }

  // A generation worker: a fake service and a driver that registers it (and heartbeats
  // `loaded`).
  struct GenWorker {
    std::unique_ptr<FakeGenerationWorker> fake;
    std::unique_ptr<DriverWorker> driver;
  };
  GenWorker AddWorker(const std::string& name, std::vector<std::string> loaded = {},
                      std::string endpoint = "") {
    GenWorker w;
    w.fake = std::make_unique<FakeGenerationWorker>(name + "-secret-0123456789");
    w.driver = std::make_unique<DriverWorker>(
        channel_, join_, name, 1, std::vector<std::string>{},
        DriverServing{endpoint.empty() ? w.fake->endpoint() : endpoint,
                      name + "-secret-0123456789"});
    EXPECT_TRUE(w.driver->status().ok()) << Describe(w.driver->status());
    w.driver->set_free_slots(0);  // no training placed here
    w.driver->set_loaded_models(std::move(loaded));
    w.driver->Heartbeat();
    return w;
  }
  // Heartbeats are handled asynchronously: give the server a moment to see them.
  static void LetHeartbeatsLand() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

  static v1::GenerateRequest ListRequest(const std::string& model, std::vector<double> energies,
                                         uint64_t seed = 0) {
    v1::GenerateRequest r;
    r.set_model(model);
    for (double e : energies) r.mutable_list()->add_items()->set_energy_gev(e);
    r.set_seed(seed);
    return r;
  }

  Generated Generate(const std::string& token, const v1::GenerateRequest& request,
                     int deadline_ms = 10000) {
    Generated g;
    auto ctx = Ctx(token, deadline_ms);
    auto reader = generation_->Generate(ctx.get(), request);
    v1::GenerateChunk chunk;
    while (reader->Read(&chunk)) g.chunks.push_back(chunk);
    g.status = reader->Finish();
    g.seed = MetadataValue(ctx->GetServerInitialMetadata(), "gantry-seed");
    g.worker = MetadataValue(ctx->GetServerInitialMetadata(), "gantry-worker");
    return g;
  }

  std::string join_ = "server-generation-join-token-0123";
  std::string token_;
  std::string sha_;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SERVER_GENERATION_FIXTURE_H_
