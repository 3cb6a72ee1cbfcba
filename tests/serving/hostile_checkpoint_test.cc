// Hostile checkpoints on the worker side: every size in the header and the model config is bounded
// before anything is allocated (truncated, padded, garbage, a header claiming petabytes, a config
// asking for billions of parameters or megabytes of text), the sandboxed verification child
// (`gantry-worker verify-checkpoint`) answers the same, a child killed by its limits is a clean
// INVALID_ARGUMENT, and the daemon's model loader refuses such a checkpoint and stays up.
#include <gtest/gtest.h>
#include <torch/serialize/output-archive.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>

#include "base/sha256.h"
#include "tests/serving/torch_model.h"
#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"
#include "workers/gan/checkpoint.h"
#include "jobspec/model_config.h"
#include "workers/runner/checkpoint_verifier.h"
#include "workers/serving/checkpoint_model_loader.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

// A sealed checkpoint (valid header and sha256) whose payload holds only `config_text`.
std::string SealedWithConfig(const std::string& config_text) {
  torch::serialize::OutputArchive archive;
  at::Tensor t = at::empty({static_cast<int64_t>(config_text.size())}, at::kByte);
  std::memcpy(t.data_ptr<uint8_t>(), config_text.data(), config_text.size());
  archive.write("config", t);
  std::ostringstream out;
  archive.save_to(out);
  const std::string payload = out.str();
  return "GANTRY-CHECKPOINT 1\nsha256 " + gantry::Sha256Hex(payload) + "\nbytes " +
         std::to_string(payload.size()) + "\n" + payload;
}

runner::CheckpointVerifierOptions Verifier() {
  runner::CheckpointVerifierOptions o;
  o.binary = GANTRY_WORKER_BINARY;
  return o;
}

struct Hostile {
  std::string name, bytes;
  absl::StatusCode code;
  std::string fragment;
};

class HostileCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = testing::WriteTorchModel("tiny", 3, dir_.File("good.ckpt"));
    const std::string bytes = ReadAll(good_.path);
    std::string huge_config = gan::SerializeModelConfig(*gan::PresetConfig("tiny"));
    const size_t line = huge_config.find("generator_filters=");
    huge_config.replace(line, huge_config.find('\n', line) - line,
                        "generator_filters=100000,100000,100000");
    std::mt19937_64 rng(1);
    std::string garbage;
    while (garbage.size() < 5000) garbage.push_back(static_cast<char>(rng()));
    const size_t header = bytes.find('\n', bytes.find("bytes ")) + 1;
    cases_ = {
        {"truncated", bytes.substr(0, bytes.size() / 2), absl::StatusCode::kDataLoss,
         "truncated or padded"},
        {"padded", bytes + "xx", absl::StatusCode::kDataLoss, "truncated or padded"},
        {"garbage", garbage, absl::StatusCode::kInvalidArgument, "not a gantry checkpoint"},
        {"empty", "", absl::StatusCode::kInvalidArgument, "not a gantry checkpoint"},
        {"petabyte_header",
         bytes.substr(0, bytes.find("bytes ")) + "bytes 1125899906842624\n" + bytes.substr(header),
         absl::StatusCode::kDataLoss, "header says 1125899906842624"},
        {"header_without_newlines", "GANTRY-CHECKPOINT 1\nsha256 " + std::string(100000, 'a'),
         absl::StatusCode::kDataLoss, "damaged header"},
        {"flipped_payload_byte",
         bytes.substr(0, bytes.size() - 10) + "\x01" + bytes.substr(bytes.size() - 9),
         absl::StatusCode::kDataLoss, "sha256 mismatch"},
        {"huge_model_config", SealedWithConfig(huge_config), absl::StatusCode::kInvalidArgument,
         "generator_filters must be <= 512"},
        {"megabyte_config_text", SealedWithConfig(std::string(1 << 20, 'x')),
         absl::StatusCode::kInvalidArgument, "at most 65536 bytes"},
        {"payload_not_an_archive",
         [] {
           const std::string junk(3000, 'j');
           return "GANTRY-CHECKPOINT 1\nsha256 " + gantry::Sha256Hex(junk) + "\nbytes 3000\n" +
                  junk;
         }(),
         absl::StatusCode::kDataLoss, "cannot be decoded"},
    };
  }

  gantry::testing::TempDir dir_;
  testing::TorchModelFile good_;
  std::vector<Hostile> cases_;
};

TEST_F(HostileCheckpointTest, ReadCheckpointBoundsEverySizeBeforeAllocating) {
  for (const Hostile& h : cases_) {
    SCOPED_TRACE(h.name);
    const std::string path = dir_.File(h.name + ".ckpt");
    WriteAll(path, h.bytes);
    absl::Status status = gan::ReadCheckpoint(path).status();
    EXPECT_EQ(status.code(), h.code) << status;
    EXPECT_NE(status.message().find(h.fragment), std::string::npos) << status;
  }
  EXPECT_TRUE(gan::ReadCheckpoint(good_.path).ok());
}

TEST_F(HostileCheckpointTest, TheSandboxedVerificationAnswersTheSameWithoutPaths) {
  EXPECT_TRUE(runner::VerifyCheckpointInChild(good_.path, "checkpoint good", Verifier()).ok());
  for (const Hostile& h : cases_) {
    SCOPED_TRACE(h.name);
    const std::string path = dir_.File(h.name + ".ckpt");
    WriteAll(path, h.bytes);
    absl::Status status = runner::VerifyCheckpointInChild(path, "checkpoint " + h.name, Verifier());
    EXPECT_EQ(status.code(), h.code) << status;
    EXPECT_NE(status.message().find(h.fragment), std::string::npos) << status;
    EXPECT_EQ(status.message().find("/proc/self/fd"), std::string::npos) << status;
  }
}

TEST_F(HostileCheckpointTest, AChildKilledByItsLimitsIsACleanInvalidArgument) {
  runner::CheckpointVerifierOptions tight = Verifier();
  tight.limits.address_space_bytes = int64_t{48} << 20;  // LibTorch cannot even start
  absl::Status status = runner::VerifyCheckpointInChild(good_.path, "checkpoint tight", tight);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("checkpoint tight could not be loaded safely"), std::string::npos)
      << status;
  runner::CheckpointVerifierOptions slow = Verifier();
  slow.timeout = absl::Milliseconds(1);
  status = runner::VerifyCheckpointInChild(good_.path, "checkpoint slow", slow);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST_F(HostileCheckpointTest, TheModelLoaderRefusesAHostileCachedCheckpointAndGoesOn) {
  CheckpointModelLoaderOptions o;
  o.server = "127.0.0.1:1";  // nothing listens: only cached files can load
  o.token = [] { return std::string("t"); };
  o.models_dir = dir_.File("models");
  o.verify = Verifier();
  std::filesystem::create_directories(o.models_dir);
  const std::string hostile = cases_[7].bytes;  // the huge model config, validly sealed
  const std::string sha = gantry::Sha256Hex(hostile);
  WriteAll(o.models_dir + "/" + sha + ".pt", hostile);
  std::filesystem::copy_file(good_.path, o.models_dir + "/" + good_.sha256 + ".pt");
  ModelLoader loader = MakeCheckpointModelLoader(o);
  v1::ServedModel model;
  model.set_checkpoint_sha256(sha);
  auto refused = loader(model);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("checkpoint " + sha), std::string::npos)
      << refused.status();
  model.set_checkpoint_sha256(good_.sha256);
  auto loaded = loader(model);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
}

}  // namespace
}  // namespace gantry::serving
