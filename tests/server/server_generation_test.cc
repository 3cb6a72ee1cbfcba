// Generation through the real gantry-server and PostgreSQL: models are registered through the
// worker protocol (a driver rank uploads a checkpoint and sends its JobResult), generation workers
// are DriverWorkers whose generation_endpoint points at FakeGenerationWorkers hosted here (real
// gRPC on loopback). Checks the router's choices, the proxy (secret, seed, deadline, cancellation,
// failover, error passthrough, streaming without buffering) and the access rules.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/generation_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using Mode = FakeGenerationWorker::Mode;

class ServerGenerationTest : public GenerationFixture {};

TEST_F(ServerGenerationTest, RoutesToTheWorkerWithTheModelAndSendsItsSecretAndSeed) {
  GenWorker alpha = AddWorker("alpha");
  GenWorker beta = AddWorker("beta", {sha_});
  LetHeartbeatsLand();
  Generated g = Generate(token_, ListRequest("calo:1", {20, 50, 90}, 42));
  ASSERT_TRUE(g.status.ok()) << Describe(g.status);
  EXPECT_EQ(alpha.fake->calls(), 0);
  EXPECT_EQ(beta.fake->calls(), 1);
  EXPECT_EQ(g.worker, "beta");
  EXPECT_EQ(g.seed, "42");
  EXPECT_EQ(beta.fake->last_authorization(), "Bearer beta-secret-0123456789")
      << "the worker gets its own secret, never the tenant's token";
  const v1::WorkerGenerateRequest sent = beta.fake->last_request();
  EXPECT_EQ(sent.model().checkpoint_sha256(), sha_);
  EXPECT_EQ(sent.model().checkpoint_size_bytes(), 3000);
  EXPECT_EQ(sent.model().model_ref(), "calo:1");
  EXPECT_DOUBLE_EQ(sent.model().energy_range_gev().max(), 100);
  EXPECT_EQ(sent.request().seed(), 42u);
  ASSERT_EQ(g.showers(), 3);
  const v1::GenerateChunk& c = g.chunks[0];
  EXPECT_EQ(c.model_ref(), "calo:1");
  ASSERT_EQ(c.showers().size(), 3 * 8 * sizeof(float));
  std::vector<float> v(3 * 8);
  std::memcpy(v.data(), c.showers().data(), c.showers().size());
  for (int i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(c.conditions(i).energy_gev(), (std::vector<double>{20, 50, 90})[i]);
    EXPECT_FLOAT_EQ(v[i * 8 + 7],
                    FakeGenerationWorker::Cell(42, i, c.conditions(i).energy_gev(), 7));
  }

  // Seed 0: the server draws one, says which, and the worker gets it.
  Generated drawn = Generate(token_, ListRequest("calo@prod", {30}));
  ASSERT_TRUE(drawn.status.ok()) << Describe(drawn.status);
  EXPECT_NE(drawn.seed, "");
  EXPECT_NE(drawn.seed, "0");
  EXPECT_EQ(std::to_string(beta.fake->last_request().request().seed()), drawn.seed);
  EXPECT_EQ(drawn.chunks[0].model_ref(), "calo:1");
}

TEST_F(ServerGenerationTest, TheLeastBusyWorkerTakesTheNextCall) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  GenWorker beta = AddWorker("beta", {sha_});
  alpha.fake->set_mode(Mode::kHold);
  beta.fake->set_mode(Mode::kHold);
  LetHeartbeatsLand();
  std::vector<Generated> results(2);
  std::thread first([&] { results[0] = Generate(token_, ListRequest("calo:1", {20, 30})); });
  ASSERT_TRUE(Eventually([&] { return alpha.fake->active() + beta.fake->active() == 1; }));
  std::thread second([&] { results[1] = Generate(token_, ListRequest("calo:1", {20, 30})); });
  EXPECT_TRUE(Eventually([&] { return alpha.fake->active() == 1 && beta.fake->active() == 1; }))
      << "the second call went to the busy worker (alpha " << alpha.fake->active() << ", beta "
      << beta.fake->active() << ")";
  alpha.fake->Release();
  beta.fake->Release();
  first.join();
  second.join();
  for (const Generated& g : results) {
    EXPECT_TRUE(g.status.ok()) << Describe(g.status);
    EXPECT_EQ(g.showers(), 2);
  }
  EXPECT_NE(results[0].worker, results[1].worker);
}

TEST_F(ServerGenerationTest, FailsOverWhenTheChosenWorkersEndpointIsDead) {
  std::string dead;
  {
    FakeGenerationWorker gone("x");
    dead = gone.endpoint();
  }
  // "alpha" sorts first and claims the model, but nothing listens at its endpoint.
  GenWorker alpha = AddWorker("alpha", {sha_}, dead);
  GenWorker beta = AddWorker("beta");
  LetHeartbeatsLand();
  Generated g = Generate(token_, ListRequest("calo:1", {40, 60}, 7));
  ASSERT_TRUE(g.status.ok()) << Describe(g.status);
  EXPECT_EQ(g.worker, "beta");
  EXPECT_EQ(g.showers(), 2);
  EXPECT_EQ(beta.fake->calls(), 1);
  // Only dead endpoints: UNAVAILABLE naming them.
  beta.driver->Close();
  ASSERT_TRUE(Eventually([&] {
    Generated again = Generate(token_, ListRequest("calo:1", {40}));
    return again.status.error_code() == grpc::StatusCode::UNAVAILABLE &&
           again.status.error_message().find(dead) != std::string::npos;
  })) << "expected UNAVAILABLE naming "
      << dead;
}

TEST_F(ServerGenerationTest, WithoutAServingWorkerItIsUnavailable) {
  auto expect_unavailable = [&](const char* why) {
    SCOPED_TRACE(why);
    Generated g = Generate(token_, ListRequest("calo:1", {50}));
    EXPECT_EQ(g.status.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(g.status);
    EXPECT_NE(g.status.error_message().find("no worker serves generation"), std::string::npos)
        << g.status.error_message();
    EXPECT_NE(g.status.error_message().find("gantry-worker daemon"), std::string::npos);
  };
  expect_unavailable("no worker at all");
  DriverWorker trainer_only(channel_, join_, "trainer-only", 1);
  LetHeartbeatsLand();
  expect_unavailable("a worker that does not generate");
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  EXPECT_TRUE(Generate(token_, ListRequest("calo:1", {50})).status.ok());
  alpha.driver->Close();
  EXPECT_TRUE(Eventually([&] {
    return Generate(token_, ListRequest("calo:1", {50})).status.error_code() ==
           grpc::StatusCode::UNAVAILABLE;
  }));
  // Until the server notices the closed stream a request may still reach alpha (more than one on
  // a slow machine, e.g. under ASan); once it answered UNAVAILABLE, none does.
  const int calls = alpha.fake->calls();
  EXPECT_GE(calls, 1);
  expect_unavailable("its control stream ended");
  EXPECT_EQ(alpha.fake->calls(), calls);
}

TEST_F(ServerGenerationTest, QueueFullAndDeadlinesPassThrough) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  alpha.fake->set_mode(Mode::kQueueFull);
  Generated full = Generate(token_, ListRequest("calo:1", {50}));
  EXPECT_EQ(full.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << Describe(full.status);
  EXPECT_NE(full.status.error_message().find("queue is full"), std::string::npos)
      << full.status.error_message();

  alpha.fake->set_mode(Mode::kHold);
  const auto deadline = std::chrono::system_clock::now() + milliseconds(800);
  Generated late = Generate(token_, ListRequest("calo:1", {50, 60}), 800);
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << Describe(late.status);
  EXPECT_EQ(late.chunks.size(), 1u) << "the first chunk arrives before the worker stalls";
  const auto seen = alpha.fake->last_deadline();
  EXPECT_LT(std::chrono::abs(seen - deadline), milliseconds(300))
      << "the worker's call carries the client's deadline";
  EXPECT_TRUE(Eventually([&] { return alpha.fake->cancelled_calls() == 1; }));
}

TEST_F(ServerGenerationTest, ClientCancellationCancelsTheWorkerCall) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  alpha.fake->set_mode(Mode::kHold);
  LetHeartbeatsLand();
  auto ctx = Ctx(token_, 30000);
  auto reader = generation_->Generate(ctx.get(), ListRequest("calo:1", {50, 60, 70}));
  v1::GenerateChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  EXPECT_EQ(alpha.fake->active(), 1);
  ctx->TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(Eventually([&] { return alpha.fake->cancelled_calls() == 1; }, 3000))
      << "the worker's call was not cancelled";
  EXPECT_TRUE(Eventually([&] { return alpha.fake->active() == 0; }, 3000));
}

TEST_F(ServerGenerationTest, UnknownModelsAliasesAndOtherTenantsModelsAreNotFound) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  const std::string other = NewTenant("chemistry");
  RegisterModel(other, "hidden", std::string(2000, 'h'));
  LetHeartbeatsLand();
  EXPECT_TRUE(Generate(other, ListRequest("hidden:1", {50})).status.ok());
  for (const std::string& ref :
       {"ghost:1", "calo:2", "calo@nope", "hidden:1", "chemistry/hidden:1"}) {
    SCOPED_TRACE(ref);
    Generated g = Generate(token_, ListRequest(ref, {50}));
    EXPECT_EQ(g.status.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(g.status);
    EXPECT_EQ(g.status.error_message().rfind("model", 0), 0u) << g.status.error_message();
  }
  EXPECT_EQ(alpha.fake->calls(), 1) << "only the owner's call reached a worker";
}

TEST_F(ServerGenerationTest, ConditionsOutsideTheTrainingRangeNameTheRange) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  Generated g = Generate(token_, ListRequest("calo:1", {50, 500}));
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(g.status);
  EXPECT_NE(g.status.error_message().find("list.items[1].energy_gev"), std::string::npos);
  EXPECT_NE(g.status.error_message().find("[10, 100] GeV"), std::string::npos)
      << g.status.error_message();
  v1::GenerateRequest range;
  range.set_model("calo@prod");
  range.mutable_range()->mutable_energy_gev()->set_min(5);
  range.mutable_range()->mutable_energy_gev()->set_max(50);
  range.mutable_range()->set_count(10);
  g = Generate(token_, range);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(g.status);
  EXPECT_NE(g.status.error_message().find("[10, 100] GeV"), std::string::npos);
  EXPECT_EQ(alpha.fake->calls(), 0);
}

TEST_F(ServerGenerationTest, AnArchivedModelIsRefusedAtOnce) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  ASSERT_TRUE(Generate(token_, ListRequest("calo:1", {50})).status.ok());
  v1::ArchiveModelRequest archive;
  archive.set_model("calo:1");
  v1::ModelVersion model;
  ASSERT_TRUE(catalog_->ArchiveModel(Ctx(token_).get(), archive, &model).ok());
  Generated g = Generate(token_, ListRequest("calo:1", {50}));
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(g.status);
  EXPECT_EQ(alpha.fake->calls(), 1) << "the cached resolution was dropped with the archive";
}

TEST_F(ServerGenerationTest, AHundredThousandShowersStreamWithoutBeingBuffered) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  alpha.fake->set_cells(10);  // 4 kB a shower: 400 MB in all, 2 MB a chunk
  LetHeartbeatsLand();
  v1::GenerateRequest r;
  r.set_model("calo:1");
  r.mutable_range()->mutable_energy_gev()->set_min(10);
  r.mutable_range()->mutable_energy_gev()->set_max(100);
  r.mutable_range()->set_count(100000);
  r.set_chunk_showers(500);
  r.set_seed(9);
  auto ctx = Ctx(token_, 120000);
  auto reader = generation_->Generate(ctx.get(), r);
  v1::GenerateChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  // The client stops reading: the worker must stop producing soon (flow control end to end).
  std::this_thread::sleep_for(milliseconds(1500));
  const int64_t ahead = alpha.fake->chunks_written() - 1;
  EXPECT_LT(ahead, 40) << "the worker ran " << ahead
                       << " chunks (2 MB each) ahead of a client that stopped reading";
  int64_t showers = chunk.shape(0), chunks = 1, next = chunk.shape(0);
  EXPECT_EQ(chunk.offset(), 0);
  while (reader->Read(&chunk)) {
    EXPECT_EQ(chunk.offset(), next);
    ASSERT_EQ(chunk.showers().size(), chunk.shape(0) * 1000 * sizeof(float));
    next += chunk.shape(0);
    showers += chunk.shape(0);
    ++chunks;
  }
  grpc::Status s = reader->Finish();
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(showers, 100000);
  EXPECT_EQ(chunks, 200);
  std::cerr << "100,000 showers: the worker ran at most " << ahead
            << " chunks ahead of a stalled client\n";

  // One more than the server's --max-showers-per-request is refused, naming the limit.
  r.mutable_range()->set_count(100001);
  Generated over = Generate(token_, r);
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.status.error_message().find("maximum is 100000"), std::string::npos)
      << over.status.error_message();
}

TEST_F(ServerGenerationTest, AChunkLargerThanTheMessageLimitIsSplit) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  alpha.fake->set_cells(25);  // 62.5 kB a shower: 300 showers are one 18.75 MB worker chunk
  LetHeartbeatsLand();
  v1::GenerateRequest r;
  r.set_model("calo:1");
  r.mutable_range()->mutable_energy_gev()->set_min(10);
  r.mutable_range()->mutable_energy_gev()->set_max(100);
  r.mutable_range()->set_count(300);
  r.set_chunk_showers(300);
  r.set_seed(5);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel =
      grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args);
  auto stub = v1::GenerationService::NewStub(channel);
  auto ctx = Ctx(token_, 60000);
  auto reader = stub->Generate(ctx.get(), r);
  v1::GenerateChunk chunk;
  int64_t next = 0, parts = 0;
  while (reader->Read(&chunk)) {
    ++parts;
    EXPECT_LE(chunk.ByteSizeLong(), 16u << 20) << "over the server's 16 MiB message limit";
    EXPECT_EQ(chunk.offset(), next);
    ASSERT_EQ(chunk.conditions_size(), chunk.shape(0));
    ASSERT_EQ(chunk.showers().size(), chunk.shape(0) * 15625 * sizeof(float));
    // The last cell of the part's first shower is the one the worker made for that index.
    float cell;
    std::memcpy(&cell, chunk.showers().data() + 15624 * sizeof(float), sizeof(float));
    EXPECT_FLOAT_EQ(cell,
                    FakeGenerationWorker::Cell(5, next, chunk.conditions(0).energy_gev(), 15624));
    next += chunk.shape(0);
  }
  grpc::Status s = reader->Finish();
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(next, 300);
  EXPECT_GE(parts, 2);
  EXPECT_EQ(alpha.fake->chunks_written(), 1);
}

TEST_F(ServerGenerationTest, ConcurrentClientsGetTheirOwnShowers) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  GenWorker beta = AddWorker("beta", {sha_});
  LetHeartbeatsLand();
  constexpr int kClients = 16;
  std::vector<Generated> results(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      results[i] = Generate(token_, ListRequest("calo:1", {10.0 + i, 20.0 + i}, 100 + i));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(results[i].status.ok()) << i << ": " << Describe(results[i].status);
    ASSERT_EQ(results[i].showers(), 2);
    const v1::GenerateChunk& c = results[i].chunks[0];
    EXPECT_DOUBLE_EQ(c.conditions(1).energy_gev(), 20.0 + i);
    float cell;
    std::memcpy(&cell, c.showers().data() + 8 * sizeof(float), sizeof(float));
    EXPECT_FLOAT_EQ(cell, FakeGenerationWorker::Cell(100 + i, 1, 20.0 + i, 0));
  }
  EXPECT_EQ(alpha.fake->calls() + beta.fake->calls(), kClients);
}

}  // namespace
}  // namespace gantry::testing
