// The no-network baseline behind the dynamic batcher (serving::BaselineBackend): a shower depends
// only on (seed, index, energy), never on its batch; bfloat16 is refused.
#include "workers/serving/baseline_backend.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "showers/toy_mc.h"
#include "workers/baseline/baseline_checkpoint.h"

namespace gantry::serving {
namespace {

TEST(BaselineBackendTest, ShowersDoNotDependOnTheBatchAndBf16IsRefused) {
  showers::ToyMcConfig mc;
  mc.events = 60;
  mc.energy_min_gev = 20;
  mc.energy_max_gev = 100;
  const showers::ShowerSet data = *showers::SimulateToyMc(mc);
  const baseline::BaselineSampler sampler = *baseline::BaselineSampler::Fit(data, {}, {});
  const std::string path = absl::StrCat(::testing::TempDir(), "/serving-baseline.ckpt");
  ASSERT_TRUE(baseline::WriteBaselineCheckpoint(path, sampler.parameters()).ok());
  absl::StatusOr<std::unique_ptr<BaselineBackend>> backend = BaselineBackend::FromCheckpoint(path);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->traits().grid, data.shape);
  EXPECT_FALSE((*backend)->traits().variable_angle);
  EXPECT_EQ((*backend)->memory_bytes(), 4 * 25 * 25 * 25 * 4);

  const int64_t cells = (*backend)->traits().cells_per_shower();
  std::vector<ShowerSpec> batch;
  for (int i = 0; i < 3; ++i) batch.push_back({7, i, 30.0f + 20 * i, 0, false});
  std::vector<float> out(3 * cells), lone(cells);
  ASSERT_TRUE((*backend)->RunBatch(batch, out.data()).ok());
  ASSERT_TRUE((*backend)->RunBatch({batch[2]}, lone.data()).ok());
  EXPECT_TRUE(std::equal(lone.begin(), lone.end(), out.begin() + 2 * cells));
  sampler.Draw(70.0, 7, 2, lone.data());
  EXPECT_TRUE(std::equal(lone.begin(), lone.end(), out.begin() + 2 * cells));

  batch[1].bfloat16 = true;
  absl::Status bf16 = (*backend)->RunBatch(batch, out.data());
  EXPECT_EQ(bf16.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bf16.message(), (*backend)->traits().bf16_unavailable);
  EXPECT_EQ(BaselineBackend::FromCheckpoint(path + ".missing").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::serving
