// The worker's WorkerGenerationService on a real loopback port (ServingExtension, as the daemon
// runs it) with real untrained generators: streamed chunks, the secret, concurrent clients,
// deadlines and cancellation, heartbeat and register contents; the model cache really frees
// memory on unload; fetched checkpoints are reused from disk.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "base/sha256.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/serving/shower_compare.h"
#include "tests/serving/torch_model.h"
#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"
#include "workers/export/model_export.h"
#include "workers/gan/bf16_support.h"
#include "workers/serving/checkpoint_model_exporter.h"
#include "workers/serving/checkpoint_model_loader.h"
#include "workers/serving/serving_extension.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;
constexpr size_t kCells = 25 * 25 * 25;

struct Reply {
  grpc::Status status;
  std::vector<v1::GenerateChunk> chunks;
  std::vector<float> cells;
};

class WorkerGenerationServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new gantry::testing::TempDir();
    model_ =
        new testing::TorchModelFile(testing::WriteTorchModel("3dgan-25", 3, dir_->File("a.ckpt")));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }

  void SetUp() override {
    agent::AgentOptions o;
    o.advertise_host = "127.0.0.1";
    o.serve_port = 0;
    o.max_batch_size = 32;
    o.max_queue_delay_ms = 2;
    extension_ = std::make_unique<ServingExtension>(
        o, testing::LocalFileLoader({{model_->sha256, model_->path}}));
    ASSERT_TRUE(extension_->StartServer().ok());
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    stub_ = v1::WorkerGenerationService::NewStub(grpc::CreateCustomChannel(
        extension_->endpoint(), grpc::InsecureChannelCredentials(), args));
  }

  static v1::WorkerGenerateRequest Request(uint64_t seed, int64_t count, int chunk = 0) {
    v1::WorkerGenerateRequest r;
    r.mutable_model()->set_checkpoint_sha256(model_->sha256);
    r.mutable_model()->set_model_ref("ele:7");
    r.mutable_model()->mutable_energy_range_gev()->set_min(10);
    r.mutable_model()->mutable_energy_range_gev()->set_max(500);
    auto* range = r.mutable_request()->mutable_range();
    range->mutable_energy_gev()->set_min(10);
    range->mutable_energy_gev()->set_max(500);
    range->set_count(count);
    r.mutable_request()->set_seed(seed);
    r.mutable_request()->set_chunk_showers(chunk);
    return r;
  }

  Reply Call(const v1::WorkerGenerateRequest& request, const std::string& secret,
             int deadline_ms = 60000, int cancel_after_chunks = -1) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
    if (!secret.empty()) ctx.AddMetadata("authorization", "Bearer " + secret);
    auto reader = stub_->Generate(&ctx, request);
    Reply reply;
    v1::GenerateChunk chunk;
    while (reader->Read(&chunk)) {
      const size_t n = chunk.showers().size() / sizeof(float);
      const size_t old = reply.cells.size();
      reply.cells.resize(old + n);
      std::memcpy(reply.cells.data() + old, chunk.showers().data(), n * sizeof(float));
      reply.chunks.push_back(chunk);
      if (static_cast<int>(reply.chunks.size()) == cancel_after_chunks) ctx.TryCancel();
    }
    reply.status = reader->Finish();
    return reply;
  }

  // The reference: the same showers straight from the backend, in one batch.
  static std::vector<float> Direct(uint64_t seed, int64_t count) {
    auto backend = TorchBackend::FromCheckpoint(model_->path);
    EXPECT_TRUE(backend.ok());
    auto plan = GenerationPlan::Create(Request(seed, count), ModelTraits{});
    std::vector<ShowerSpec> specs;
    for (int64_t i = 0; i < count; ++i) specs.push_back(plan->Shower(i));
    std::vector<float> out(count * kCells);
    EXPECT_TRUE((*backend)->RunBatch(specs, out.data()).ok());
    return out;
  }

  static double WorstRelative(const std::vector<float>& a, const std::vector<float>& b) {
    return testing::WorstRelativeDifference(a, b, kCells);
  }

  static gantry::testing::TempDir* dir_;
  static testing::TorchModelFile* model_;
  std::unique_ptr<ServingExtension> extension_;
  std::unique_ptr<v1::WorkerGenerationService::Stub> stub_;
};

gantry::testing::TempDir* WorkerGenerationServiceTest::dir_ = nullptr;
testing::TorchModelFile* WorkerGenerationServiceTest::model_ = nullptr;

TEST_F(WorkerGenerationServiceTest, StreamsChunksOfTheRequestedShowers) {
  Reply r = Call(Request(5, 150, 64), extension_->secret());
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.chunks.size(), 3u);
  const int64_t sizes[] = {64, 64, 22};
  for (int i = 0; i < 3; ++i) {
    const v1::GenerateChunk& c = r.chunks[i];
    EXPECT_EQ(c.offset(), 64 * i);
    ASSERT_EQ(c.shape_size(), 4);
    EXPECT_EQ(c.shape(0), sizes[i]);
    EXPECT_EQ(c.shape(1), 25);
    EXPECT_EQ(c.shape(3), 25);
    EXPECT_EQ(c.conditions_size(), sizes[i]);
    EXPECT_EQ(c.showers().size(), sizes[i] * kCells * sizeof(float));
    EXPECT_EQ(c.model_ref(), "ele:7");
    for (const v1::Condition& cond : c.conditions()) {
      EXPECT_GE(cond.energy_gev(), 10);
      EXPECT_LE(cond.energy_gev(), 500);
    }
  }
  const std::vector<float> direct = Direct(5, 150);
  EXPECT_LE(WorstRelative(r.cells, direct), 1e-4);
  ASSERT_EQ(r.cells.size(), direct.size());
  // The same call again: batched the same way, so bit-identical.
  Reply again = Call(Request(5, 150, 64), extension_->secret());
  ASSERT_TRUE(again.status.ok());
  EXPECT_EQ(0, std::memcmp(r.cells.data(), again.cells.data(), r.cells.size() * sizeof(float)));
}

TEST_F(WorkerGenerationServiceTest, RefusesCallersWithoutTheSecret) {
  EXPECT_EQ(Call(Request(5, 1), "not-the-secret").status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(Request(5, 1), "").status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(extension_->cache().Snapshot().empty()) << "nothing may be loaded for them";
}

TEST_F(WorkerGenerationServiceTest, ConcurrentClientsGetTheirOwnShowers) {
  const int clients = 6;
  std::vector<Reply> replies(clients);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back(
        [&, i] { replies[i] = Call(Request(100 + i, 10, 4), extension_->secret()); });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < clients; ++i) {
    ASSERT_TRUE(replies[i].status.ok()) << i << ": " << replies[i].status.error_message();
    const std::vector<float> direct = Direct(100 + i, 10);
    EXPECT_LE(WorstRelative(replies[i].cells, direct), 1e-4) << "client " << i;
    for (int j = 0; j < i; ++j) EXPECT_GT(WorstRelative(replies[i].cells, replies[j].cells), 0.05);
  }
  const auto loaded = extension_->cache().Snapshot();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(extension_->cache().loads(), 1);
  EXPECT_GT(loaded[0].stats.largest_batch, 4) << "concurrent requests were never merged";
}

TEST_F(WorkerGenerationServiceTest, DeadlineAndCancellationEndTheWork) {
  Reply late = Call(Request(9, 100000), extension_->secret(), /*deadline_ms=*/1500);
  EXPECT_EQ(late.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  Reply cancelled = Call(Request(10, 100000, 32), extension_->secret(), 60000,
                         /*cancel_after_chunks=*/1);
  EXPECT_EQ(cancelled.status.error_code(), grpc::StatusCode::CANCELLED);
  // The worker stops generating for both: nothing stays queued or active.
  v1::Heartbeat hb;
  for (int i = 0; i < 100; ++i) {
    hb.Clear();
    extension_->FillHeartbeat(hb);
    if (hb.generation_queued_showers() == 0 && hb.generation_active_requests() == 0) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(hb.generation_queued_showers(), 0);
  EXPECT_EQ(hb.generation_active_requests(), 0);
  const auto stats = extension_->cache().Snapshot().at(0).stats;
  EXPECT_LT(stats.batched_showers, 5000);
  EXPECT_TRUE(Call(Request(11, 2), extension_->secret()).status.ok());
}

TEST_F(WorkerGenerationServiceTest, ReportsEndpointSecretAndLoadedModels) {
  v1::RegisterRequest reg;
  extension_->FillRegister(reg);
  EXPECT_EQ(reg.generation_endpoint(), "127.0.0.1:" + std::to_string(extension_->port()));
  EXPECT_EQ(reg.generation_secret().size(), 64u);
  EXPECT_NE(reg.generation_secret(), RandomSecret());
  v1::Heartbeat hb;
  extension_->FillHeartbeat(hb);
  EXPECT_EQ(hb.loaded_models_size(), 0);
  ASSERT_TRUE(Call(Request(1, 1), extension_->secret()).status.ok());
  hb.Clear();
  extension_->FillHeartbeat(hb);
  ASSERT_EQ(hb.loaded_models_size(), 1);
  EXPECT_EQ(hb.loaded_models(0).checkpoint_sha256(), model_->sha256);
  EXPECT_GT(hb.loaded_models(0).memory_bytes(), 872000 * 4);  // 3dgan-25: 872,808 parameters
}

TEST_F(WorkerGenerationServiceTest, UnknownModelAndBadRequestsAreErrors) {
  v1::WorkerGenerateRequest r = Request(1, 1);
  r.mutable_model()->set_checkpoint_sha256(std::string(64, 'e'));
  EXPECT_EQ(Call(r, extension_->secret()).status.error_code(), grpc::StatusCode::NOT_FOUND);
  r = Request(1, 1);
  r.mutable_request()->mutable_range()->mutable_energy_gev()->set_max(900);
  Reply bad = Call(r, extension_->secret());
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.status.error_message().find("10..500 GeV"), std::string::npos);
}

// BF16 against FP32 on the same latent inputs: every cell within kBf16CellTolerance of its
// shower's peak cell and every shower's energy sum within kBf16SumTolerance. bfloat16 keeps 8
// significant bits (relative rounding 2^-9 = 0.2% per value); five layers of sums over up to 2,300
// products accumulate to ~1% on single cells, less on sums over 15,625 cells. The bounds are ~3x
// the worst seen on untrained 3dgan-25 generators (which have no training to make them smooth).
constexpr double kBf16CellTolerance = 0.05;
constexpr double kBf16SumTolerance = 0.02;

double WorstSumDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t s = 0; s + kCells <= a.size() && s + kCells <= b.size(); s += kCells) {
    double sa = 0, sb = 0;
    for (size_t i = s; i < s + kCells; ++i) {
      sa += a[i];
      sb += b[i];
    }
    if (sa > 0) worst = std::max(worst, std::abs(sa - sb) / sa);
  }
  return worst;
}

TEST_F(WorkerGenerationServiceTest, Bf16ShowersComeBackAsFloat32CloseToFp32) {
  const v1::WorkerGenerateRequest fp32 = Request(9, 40, 16);
  v1::WorkerGenerateRequest bf16 = fp32;
  bf16.mutable_request()->set_precision(v1::PRECISION_BF16);
  Reply a = Call(fp32, extension_->secret());
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  Reply b = Call(bf16, extension_->secret());
  if (absl::Status hardware = gan::Bf16Support(); !hardware.ok()) {
    // A machine without the instructions answers as the override test expects.
    EXPECT_EQ(b.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_EQ(b.status.error_message(), hardware.message());
    return;
  }
  ASSERT_TRUE(b.status.ok()) << b.status.error_message();
  ASSERT_EQ(b.chunks.size(), a.chunks.size());
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    EXPECT_EQ(b.chunks[i].showers().size(), a.chunks[i].showers().size()) << "float32 cells";
    EXPECT_EQ(b.chunks[i].conditions(0).energy_gev(), a.chunks[i].conditions(0).energy_gev());
  }
  ASSERT_EQ(b.cells.size(), a.cells.size());
  EXPECT_NE(0, std::memcmp(a.cells.data(), b.cells.data(), a.cells.size() * sizeof(float)))
      << "BF16 gave FP32's bits: it was not computed in bfloat16";
  const double cell = WorstRelative(b.cells, a.cells), sum = WorstSumDifference(a.cells, b.cells);
  std::cout << "BF16 vs FP32: worst cell " << cell << " of the shower's peak, worst energy sum "
            << sum << "\n";
  EXPECT_LE(cell, kBf16CellTolerance);
  EXPECT_LE(sum, kBf16SumTolerance);
  for (float x : b.cells) ASSERT_TRUE(std::isfinite(x) && x >= 0);

  // FP32 and BF16 requests batched together: each shower is computed in its own precision.
  std::vector<Reply> mixed(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(
        [&, i] { mixed[i] = Call(i % 2 == 0 ? fp32 : bf16, extension_->secret()); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(mixed[i].status.ok()) << i << ": " << mixed[i].status.error_message();
    if (i % 2 == 0) {
      EXPECT_LE(WorstRelative(mixed[i].cells, a.cells), 1e-4)
          << "FP32 showers depend on the batch only by rounding (never computed in BF16)";
    } else {
      EXPECT_LE(WorstRelative(mixed[i].cells, a.cells), kBf16CellTolerance);
      EXPECT_NE(0,
                std::memcmp(mixed[i].cells.data(), a.cells.data(), a.cells.size() * sizeof(float)));
    }
  }
}

TEST_F(WorkerGenerationServiceTest, Bf16IsRefusedWhereTheHardwareLacksIt) {
  // The backend reads the hardware answer when the model loads, i.e. on the first call below.
  ASSERT_EQ(setenv(gan::kPretendNoBf16Env, "1", 1), 0);
  v1::WorkerGenerateRequest bf16 = Request(9, 4);
  bf16.mutable_request()->set_precision(v1::PRECISION_BF16);
  Reply refused = Call(bf16, extension_->secret());
  Reply fp32 = Call(Request(9, 4), extension_->secret());
  unsetenv(gan::kPretendNoBf16Env);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(refused.status.error_message(),
            "this worker's CPU lacks AVX512-BF16/AMX; use PRECISION_FP32");
  EXPECT_TRUE(refused.chunks.empty());
  EXPECT_TRUE(fp32.status.ok()) << fp32.status.error_message();
  EXPECT_EQ(fp32.cells.size(), 4 * kCells);
}

int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(ModelCacheMemoryTest, UnloadingGivesTheMemoryBack) {
  // With room for one model, loading 12 models one after the other unloads 11: if unloading
  // leaked the generators (or kept their pages), the process would grow by ~12 models.
  gantry::testing::TempDir dir;
  std::map<std::string, std::string> files;
  std::vector<std::string> shas;
  for (int i = 0; i < 13; ++i) {
    testing::TorchModelFile f =
        testing::WriteTorchModel("3dgan-25", 50 + i, dir.File("m" + std::to_string(i)));
    files[f.sha256] = f.path;
    shas.push_back(f.sha256);
  }
  auto served = [](const std::string& sha) {
    v1::ServedModel m;
    m.set_checkpoint_sha256(sha);
    return m;
  };
  int64_t model_bytes = 0;
  {  // warm-up: LibTorch's one-time allocations do not count
    ModelCache warm({}, testing::LocalFileLoader(files), nullptr);
    ASSERT_TRUE(warm.Acquire(served(shas[12])).ok());
    model_bytes = warm.loaded_bytes();
  }
  malloc_trim(0);
  const int64_t before = RssBytes();
  ModelCacheOptions o;
  o.max_bytes = model_bytes + model_bytes / 2;
  ModelCache cache(o, testing::LocalFileLoader(files), nullptr);
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(cache.Acquire(served(shas[i])).ok());
  const int64_t after = RssBytes();
  std::cout << "model " << model_bytes << " bytes; RSS " << before << " -> " << after
            << " after 12 loads and 11 unloads\n";
  EXPECT_EQ(cache.loads(), 12);
  EXPECT_EQ(cache.unloads(), 11);
  EXPECT_EQ(cache.Snapshot().size(), 1u);
  EXPECT_LT(after - before, 4 * model_bytes) << "unloaded models kept their memory";

  // Six models loaded at once, then all unloaded: the process shrinks by most of them.
  int64_t six_loaded = 0;
  {
    ModelCacheOptions roomy;
    roomy.max_bytes = 7 * model_bytes;
    ModelCache six(roomy, testing::LocalFileLoader(files), nullptr);
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(six.Acquire(served(shas[i])).ok());
    six_loaded = RssBytes();
  }
  const int64_t unloaded = RssBytes();
  std::cout << "six models loaded: RSS " << six_loaded << ", after unloading them " << unloaded
            << "\n";
  EXPECT_GE(six_loaded - unloaded, 3 * model_bytes) << "RSS did not drop on unload";
}

TEST(CheckpointFetchTest, ReusesAVerifiedFileAndRefetchesACorruptOne) {
  gantry::testing::TempDir dir;
  testing::TorchModelFile f = testing::WriteTorchModel("tiny", 1, dir.File("t.ckpt"));
  CheckpointModelLoaderOptions o;
  o.server = "127.0.0.1:1";  // nothing listens: any fetch fails
  o.token = [] { return std::string("t"); };
  o.models_dir = dir.File("models");
  o.verify.binary = GANTRY_WORKER_BINARY;
  std::filesystem::create_directories(o.models_dir);
  const std::string cached = o.models_dir + "/" + f.sha256 + ".pt";
  std::filesystem::copy_file(f.path, cached);
  auto path = FetchModelCheckpoint(o, f.sha256);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, cached);
  auto backend = MakeCheckpointModelLoader(o)([&] {
    v1::ServedModel m;
    m.set_checkpoint_sha256(f.sha256);
    return m;
  }());
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::ofstream(cached, std::ios::app) << "garbage";
  auto refetch = FetchModelCheckpoint(o, f.sha256);
  EXPECT_EQ(refetch.status().code(), absl::StatusCode::kUnavailable) << refetch.status();
  EXPECT_FALSE(std::filesystem::exists(cached)) << "a corrupt file never counts as cached";
  EXPECT_EQ(FetchModelCheckpoint(o, "zz").status().code(), absl::StatusCode::kInvalidArgument);
}

// Export on the worker's service, with an exporter over the local checkpoint (the daemon's fetches
// it from the server first): metadata, then bytes in chunks of at most 1 MiB, matching the
// declared size and sha256 and the offline export of the same checkpoint.
TEST(WorkerExportTest, StreamsMetadataThenTheFileAndRefusesBadCalls) {
  gantry::testing::TempDir dir;
  const testing::TorchModelFile model = testing::WriteTorchModel("3dgan-25", 3, dir.File("e.ckpt"));
  agent::AgentOptions o;
  o.advertise_host = "127.0.0.1";
  o.serve_port = 0;
  ModelExporter exporter = [&](const v1::WorkerExportRequest& r) -> absl::StatusOr<ExportedFile> {
    if (r.model().checkpoint_sha256() != model.sha256) {
      return absl::NotFoundError("no such checkpoint");
    }
    auto e = exporter::ExportCheckpoint(model.path,
                                        r.format() == v1::EXPORT_FORMAT_ONNX
                                            ? exporter::ExportFormat::kOnnx
                                            : exporter::ExportFormat::kPytorch,
                                        r.profile());
    if (!e.ok()) return e.status();
    ExportedFile f;
    f.bytes = std::move(e->bytes);
    for (const auto& t : e->inputs) f.metadata.add_inputs()->set_name(t.name);
    return f;
  };
  ServingExtension with(o, testing::LocalFileLoader({}), exporter);
  ServingExtension without(o, testing::LocalFileLoader({}));
  ASSERT_TRUE(with.StartServer().ok());
  ASSERT_TRUE(without.StartServer().ok());
  auto call = [](const ServingExtension& ext, const std::string& secret, const std::string& sha,
                 v1::ExportFormat format, std::vector<v1::ExportModelChunk>* chunks,
                 v1::ExportProfile profile = v1::EXPORT_PROFILE_UNSPECIFIED) {
    auto stub = v1::WorkerGenerationService::NewStub(
        grpc::CreateChannel(ext.endpoint(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + secret);
    v1::WorkerExportRequest r;
    r.mutable_model()->set_checkpoint_sha256(sha);
    r.mutable_model()->set_model_ref("ele:3");
    r.set_format(format);
    r.set_profile(profile);
    auto reader = stub->Export(&ctx, r);
    v1::ExportModelChunk chunk;
    while (reader->Read(&chunk)) chunks->push_back(chunk);
    return reader->Finish();
  };
  std::vector<v1::ExportModelChunk> chunks;
  grpc::Status s = call(with, with.secret(), model.sha256, v1::EXPORT_FORMAT_PYTORCH, &chunks);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(chunks.size(), 2u);
  ASSERT_TRUE(chunks[0].has_metadata());
  const v1::ExportMetadata& m = chunks[0].metadata();
  EXPECT_EQ(m.format(), v1::EXPORT_FORMAT_PYTORCH);
  EXPECT_EQ(m.profile(), v1::EXPORT_PROFILE_GANTRY) << "an unset profile is the gantry profile";
  EXPECT_EQ(m.model_ref(), "ele:3");
  EXPECT_EQ(m.checkpoint_sha256(), model.sha256);
  ASSERT_EQ(m.inputs_size(), 2);
  EXPECT_EQ(m.inputs(0).name(), "latent");
  std::string bytes;
  for (size_t i = 1; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].offset(), static_cast<int64_t>(bytes.size()));
    EXPECT_LE(chunks[i].data().size(), size_t{1} << 20);
    bytes += chunks[i].data();
  }
  EXPECT_GT(chunks.size(), 2u) << "a 3dgan-25 generator is several MiB: more than one chunk";
  EXPECT_EQ(m.size_bytes(), static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(m.sha256(), Sha256Hex(bytes));
  EXPECT_EQ(bytes,
            exporter::ExportCheckpoint(model.path, exporter::ExportFormat::kPytorch)->bytes);

  chunks.clear();
  EXPECT_EQ(call(with, "wrong", model.sha256, v1::EXPORT_FORMAT_ONNX, &chunks).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(
      call(with, with.secret(), model.sha256, v1::EXPORT_FORMAT_UNSPECIFIED, &chunks).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call(with, with.secret(), "zz", v1::EXPORT_FORMAT_ONNX, &chunks).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // A profile the format does not write is refused before the exporter runs.
  s = call(with, with.secret(), model.sha256, v1::EXPORT_FORMAT_ONNX, &chunks,
           v1::EXPORT_PROFILE_DDML);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("give format torchscript"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(
      call(with, with.secret(), std::string(64, 'a'), v1::EXPORT_FORMAT_ONNX, &chunks).error_code(),
      grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(
      call(without, without.secret(), model.sha256, v1::EXPORT_FORMAT_ONNX, &chunks).error_code(),
      grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_TRUE(chunks.empty());
}

// The daemon's exporter on checkpoints already in its model folder (so no server is asked): the
// export with the generator's interface, and a hostile checkpoint's error without the worker's
// paths.
TEST(CheckpointModelExporterTest, ExportsWithTheInterfaceAndKeepsPathsOutOfErrors) {
  gantry::testing::TempDir dir;
  const std::string models = dir.File("models");
  std::filesystem::create_directories(models);
  const testing::TorchModelFile model = testing::WriteTorchModel("3dgan-25", 5, dir.File("m.ckpt"));
  std::filesystem::copy_file(model.path, models + "/" + model.sha256 + ".pt");
  const std::string garbage = "not a checkpoint at all";
  const std::string garbage_sha = Sha256Hex(garbage);
  std::ofstream(models + "/" + garbage_sha + ".pt") << garbage;
  CheckpointModelLoaderOptions options;
  options.server = "127.0.0.1:1";  // never dialled: both checkpoints are there
  options.models_dir = models;
  options.verify.binary = GANTRY_WORKER_BINARY;
  ModelExporter exporter = MakeCheckpointModelExporter(options);

  v1::ServedModel served;
  served.set_checkpoint_sha256(model.sha256);
  served.set_model_ref("ele:5");
  auto request = [&served](v1::ExportFormat format,
                           v1::ExportProfile profile = v1::EXPORT_PROFILE_UNSPECIFIED) {
    v1::WorkerExportRequest r;
    *r.mutable_model() = served;
    r.set_format(format);
    r.set_profile(profile);
    return r;
  };
  absl::StatusOr<ExportedFile> onnx = exporter(request(v1::EXPORT_FORMAT_ONNX));
  ASSERT_TRUE(onnx.ok()) << onnx.status();
  EXPECT_EQ(onnx->bytes,
            exporter::ExportCheckpoint(model.path, exporter::ExportFormat::kOnnx)->bytes);
  EXPECT_EQ(onnx->metadata.format(), v1::EXPORT_FORMAT_ONNX);
  EXPECT_EQ(onnx->metadata.profile(), v1::EXPORT_PROFILE_GANTRY);
  EXPECT_EQ(std::vector<int64_t>(onnx->metadata.grid().begin(), onnx->metadata.grid().end()),
            (std::vector<int64_t>{25, 25, 25}));
  ASSERT_EQ(onnx->metadata.inputs_size(), 2);
  EXPECT_EQ(onnx->metadata.inputs(0).name(), "latent");
  EXPECT_EQ(onnx->metadata.inputs(0).shape(1), 200);
  EXPECT_EQ(onnx->metadata.inputs(0).element_type(), "float32");
  ASSERT_EQ(onnx->metadata.outputs_size(), 1);
  EXPECT_EQ(onnx->metadata.outputs(0).name(), "shower");
  EXPECT_EQ(onnx->metadata.outputs(0).shape_size(), 4);

  // The ddml profile as TorchScript: its interface (uniform latent [N, L, 1, 1, 1], [N, z, x, y]).
  absl::StatusOr<ExportedFile> ddml =
      exporter(request(v1::EXPORT_FORMAT_TORCHSCRIPT, v1::EXPORT_PROFILE_DDML));
  ASSERT_TRUE(ddml.ok()) << ddml.status();
  EXPECT_EQ(ddml->metadata.profile(), v1::EXPORT_PROFILE_DDML);
  ASSERT_EQ(ddml->metadata.inputs_size(), 2);
  EXPECT_EQ(ddml->metadata.inputs(0).shape_size(), 5);
  EXPECT_EQ(ddml->bytes.substr(0, 2), "PK") << "a TorchScript file is a zip archive";

  served.set_checkpoint_sha256(garbage_sha);
  absl::StatusOr<ExportedFile> bad = exporter(request(v1::EXPORT_FORMAT_PYTORCH));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find(dir.path()), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find(garbage_sha), std::string::npos) << bad.status();
  EXPECT_EQ(exporter(request(v1::EXPORT_FORMAT_UNSPECIFIED)).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A model folder that cannot be created: the error names the model, not the folder.
  std::ofstream(dir.File("plain-file")) << "x";
  CheckpointModelLoaderOptions broken = options;
  broken.models_dir = dir.File("plain-file") + "/models";
  absl::StatusOr<ExportedFile> no_dir =
      MakeCheckpointModelExporter(broken)(request(v1::EXPORT_FORMAT_ONNX));
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().message().find(dir.path()), std::string::npos) << no_dir.status();
  EXPECT_NE(no_dir.status().message().find("<model cache>"), std::string::npos) << no_dir.status();
}

}  // namespace
}  // namespace gantry::serving
