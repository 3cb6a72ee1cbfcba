// Baseline checkpoints (baseline_checkpoint.h): the round trip, and damaged or hostile files
// refused with clear errors before anything large is allocated.
#include "workers/baseline/baseline_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/sha256.h"
#include "showers/toy_mc.h"
#include "workers/gan/checkpoint_envelope.h"

namespace gantry::baseline {
namespace {

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/baseline-", name);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A whole checkpoint file around `payload`, with a header that matches it.
std::string Sealed(const std::string& payload) {
  return absl::StrCat(gan::kCheckpointMagic, "\nsha256 ", Sha256Hex(payload), "\nbytes ",
                      payload.size(), "\n", payload);
}

class BaselineCheckpointTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    showers::ToyMcConfig mc;
    mc.events = 200;
    mc.energy_min_gev = 10;
    mc.energy_max_gev = 200;
    absl::StatusOr<showers::ShowerSet> data = showers::SimulateToyMc(mc);
    ASSERT_TRUE(data.ok());
    absl::StatusOr<BaselineSampler> sampler = BaselineSampler::Fit(*data, {}, {});
    ASSERT_TRUE(sampler.ok()) << sampler.status();
    parameters_ = new BaselineParameters(sampler->parameters());
  }
  static void TearDownTestSuite() { delete parameters_; }

  // The payload of the fitted baseline with `from` replaced by `to` in its text, sealed.
  std::string EditedFile(const std::string& from, const std::string& to) {
    std::string payload = SerializeBaselinePayload(*parameters_);
    const size_t at = payload.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    payload.replace(at, from.size(), to);
    return Sealed(payload);
  }

  absl::Status ReadBytes(const std::string& name, const std::string& bytes) {
    const std::string path = TempPath(name);
    WriteAll(path, bytes);
    return ReadBaselineCheckpoint(path).status();
  }

  static BaselineParameters* parameters_;
};
BaselineParameters* BaselineCheckpointTest::parameters_ = nullptr;

TEST_F(BaselineCheckpointTest, RoundTripKeepsEveryValueAndEveryShower) {
  const std::string path = TempPath("round-trip.ckpt");
  ASSERT_TRUE(WriteBaselineCheckpoint(path, *parameters_).ok());
  EXPECT_EQ(*gan::PeekCheckpointKind(path), gan::CheckpointKind::kBaseline);
  absl::StatusOr<BaselineParameters> read = ReadBaselineCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kind, parameters_->kind);
  EXPECT_EQ(read->grid, parameters_->grid);
  EXPECT_EQ(read->a, parameters_->a);
  EXPECT_EQ(read->b, parameters_->b);
  EXPECT_EQ(read->modes, parameters_->modes);
  EXPECT_EQ(read->sigma, parameters_->sigma);
  EXPECT_EQ(read->spot_gev, parameters_->spot_gev);
  EXPECT_EQ(read->energy_min_gev, parameters_->energy_min_gev);
  EXPECT_EQ(read->energy_max_gev, parameters_->energy_max_gev);
  EXPECT_EQ(read->fit_events, parameters_->fit_events);
  EXPECT_EQ(read->data_nonzero_cells, parameters_->data_nonzero_cells);
  const BaselineSampler before = *BaselineSampler::Create(*parameters_);
  const BaselineSampler after = *BaselineSampler::Create(*read);
  EXPECT_EQ(after.Sample({20, 120}, 4).cells, before.Sample({20, 120}, 4).cells);
  // 62,500 float32 values and a few lines: bounded by the grid.
  EXPECT_LT(ReadAll(path).size(), 62500u * 4 + 1024);
}

TEST_F(BaselineCheckpointTest, DamagedFilesAreRefused) {
  const std::string path = TempPath("whole.ckpt");
  ASSERT_TRUE(WriteBaselineCheckpoint(path, *parameters_).ok());
  const std::string whole = ReadAll(path);
  // Truncated, padded, flipped: the envelope says so.
  absl::Status truncated = ReadBytes("truncated.ckpt", whole.substr(0, whole.size() - 100));
  EXPECT_EQ(truncated.code(), absl::StatusCode::kDataLoss) << truncated;
  EXPECT_NE(truncated.message().find("truncated"), std::string::npos) << truncated;
  EXPECT_EQ(ReadBytes("padded.ckpt", whole + "x").code(), absl::StatusCode::kDataLoss);
  std::string flipped = whole;
  flipped[flipped.size() - 7] ^= 0x10;
  absl::Status mismatch = ReadBytes("flipped.ckpt", flipped);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(mismatch.message().find("sha256"), std::string::npos) << mismatch;
  EXPECT_EQ(ReadBytes("empty.ckpt", "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadBaselineCheckpoint(TempPath("missing.ckpt")).status().code(),
            absl::StatusCode::kNotFound);
  // A networks checkpoint (a torch archive payload) is not a baseline.
  absl::Status networks = ReadBytes("networks.ckpt", Sealed("PK\x03\x04 a zip archive"));
  EXPECT_EQ(networks.code(), absl::StatusCode::kInvalidArgument) << networks;
}

TEST_F(BaselineCheckpointTest, HostileCountsAreRefusedBeforeAllocating) {
  const std::string count = absl::StrCat("values float32le ", 4 * parameters_->cells());
  struct Case {
    std::string name, from, to, says;
  };
  const std::vector<Case> cases = {
      // A grid of 10^12 cells, or one just over the bound, with a matching count.
      {"huge-grid", "grid 25 25 25", "grid 1000000 1000000 1", "grid"},
      {"over-bound", "grid 25 25 25", "grid 1024 1024 2", "cells"},
      {"many-modes", "modes 2", "modes 100000", "modes"},
      {"count", count, "values float32le 999999999999", "values"},
      {"negative-count", count, "values float32le -4", "values"},
      {"kind", "kind baseline-spots", "kind baseline-magic", "kind"},
      {"sigma", "sigma ", "sigma nan ", "sigma"},
      {"spot", "spot_gev ", "spot_gev -", "spot"},
  };
  for (const Case& c : cases) {
    absl::Status status = ReadBytes(c.name + ".ckpt", EditedFile(c.from, c.to));
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << c.name << ": " << status;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << c.name << ": " << status;
  }
  // Sealed (the envelope is right) but with a value missing or one too many.
  std::string payload = SerializeBaselinePayload(*parameters_);
  for (const std::string& edited : {payload.substr(0, payload.size() - 4), payload + "four"}) {
    absl::Status status = ReadBytes("value-count.ckpt", Sealed(edited));
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_NE(status.message().find("bytes of values"), std::string::npos) << status;
  }
  // Values that are not finite.
  payload = SerializeBaselinePayload(*parameters_);
  const float nan = std::nanf("");
  std::memcpy(payload.data() + payload.size() - 4, &nan, 4);
  absl::Status not_finite = ReadBytes("nan.ckpt", Sealed(payload));
  EXPECT_EQ(not_finite.code(), absl::StatusCode::kDataLoss) << not_finite;
  // No values line within the text's bound.
  absl::Status no_values = ReadBytes(
      "no-values.ckpt", Sealed(absl::StrCat(gan::kBaselinePayloadMagic, std::string(8192, 'x'))));
  EXPECT_EQ(no_values.code(), absl::StatusCode::kDataLoss) << no_values;
}

TEST_F(BaselineCheckpointTest, WritingInvalidParametersIsRefused) {
  BaselineParameters bad = *parameters_;
  bad.a.pop_back();
  EXPECT_EQ(WriteBaselineCheckpoint(TempPath("bad.ckpt"), bad).code(),
            absl::StatusCode::kInvalidArgument);
  bad = *parameters_;
  bad.kind = BaselineKind::kTemplate;  // with a spot energy
  EXPECT_EQ(WriteBaselineCheckpoint(TempPath("bad.ckpt"), bad).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::baseline
