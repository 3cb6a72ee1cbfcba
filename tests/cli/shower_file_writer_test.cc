// Tests of showers::ShowerFileWriter: both 3DGAN layouts written in several appends and read back
// with showers::ReadShowerFile and with h5py (the keys and values the Python analysis scripts use),
// and the errors it reports.
#include "showers/shower_file_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"
#include "tests/support/temp_dir.h"

namespace gantry::showers {
namespace {

using ::testing::HasSubstr;

ShowerSet Toy(Layout layout, int64_t events, uint64_t seed) {
  ToyMcConfig config;
  config.layout = layout;
  config.events = events;
  config.energy_min_gev = 10;
  config.energy_max_gev = 200;
  config.seed = seed;
  absl::StatusOr<ShowerSet> set = SimulateToyMc(config);
  EXPECT_TRUE(set.ok()) << set.status();
  return *set;
}

// Events [first, first + count) of `set` as a set of its own.
ShowerSet Slice(const ShowerSet& set, int64_t first, int64_t count) {
  ShowerSet s = set;
  s.cells.assign(set.event(first), set.event(first) + count * set.cells_per_event());
  s.energy_gev.assign(set.energy_gev.begin() + first, set.energy_gev.begin() + first + count);
  if (!set.theta_rad.empty()) {
    s.theta_rad.assign(set.theta_rad.begin() + first, set.theta_rad.begin() + first + count);
  }
  return s;
}

// Runs a Python snippet on Debian's python3 with h5py; returns its exit code.
int RunPython(const std::string& dir, const std::string& code) {
  const std::string script = dir + "/check.py";
  std::ofstream(script) << code;
  return std::system(absl::StrCat("/usr/bin/python3 ", script).c_str());
}

TEST(ShowerFileWriterTest, LayoutForShape) {
  EXPECT_EQ(*Layout3DGanForShape({25, 25, 25}), Layout::kFixedAngle3DGan);
  EXPECT_EQ(*Layout3DGanForShape({51, 51, 25}), Layout::kVariableAngle3DGan);
  absl::StatusOr<Layout> other = Layout3DGanForShape({45, 16, 9});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("45x16x9"));
}

TEST(ShowerFileWriterTest, FixedAngleAppendsReadBackIdentically) {
  gantry::testing::TempDir dir;
  const ShowerSet set = Toy(Layout::kFixedAngle3DGan, 13, 3);
  ShowerFileWriterOptions options;
  options.particle = "Gamma";
  options.chunk_events = 4;  // appends straddle chunk boundaries
  auto writer = ShowerFileWriter::Create(dir.File("fixed.h5"), options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  // 1 + 5 + 7 events in three appends, the first through the raw-pointer overload.
  const ShowerSet first = Slice(set, 0, 1);
  ASSERT_TRUE((*writer)->Append(first.cells.data(), 1, first.energy_gev.data(), nullptr).ok());
  ASSERT_TRUE((*writer)->Append(Slice(set, 1, 5)).ok());
  ASSERT_TRUE((*writer)->Append(Slice(set, 6, 7)).ok());
  EXPECT_EQ((*writer)->events(), 13);
  ASSERT_TRUE((*writer)->Close().ok());

  absl::StatusOr<ShowerSet> read = ReadShowerFile(dir.File("fixed.h5"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->layout, Layout::kFixedAngle3DGan);
  EXPECT_EQ(read->events(), 13);
  EXPECT_EQ(read->particle, "Gamma");
  EXPECT_EQ(read->cells, set.cells);
  EXPECT_EQ(read->energy_gev, set.energy_gev);
  EXPECT_TRUE(read->theta_rad.empty());

  // The keys, shapes and dtypes of the 3DGAN fixed-angle files; target = [PDG id, E, 0, 0].
  EXPECT_EQ(RunPython(dir.path(), absl::StrCat(R"(
import h5py, numpy as np, sys
f = h5py.File(")",
                                               dir.File("fixed.h5"), R"(", "r")
assert sorted(f.keys()) == ["ECAL", "target"], list(f.keys())
assert f["ECAL"].shape == (13, 25, 25, 25) and f["ECAL"].dtype == np.float32
t = f["target"][:]
assert t.shape == (13, 4) and f["target"].dtype == np.float32
assert (t[:, 0] == 22).all() and (t[:, 2:] == 0).all(), t
assert f.attrs["particle"] in (b"Gamma", "Gamma")
print("ok", t[:3, 1])
)")),
            0);
}

TEST(ShowerFileWriterTest, VariableAngleMatchesWriteShowerFile) {
  gantry::testing::TempDir dir;
  const ShowerSet set = Toy(Layout::kVariableAngle3DGan, 6, 9);
  ASSERT_TRUE(WriteShowerFile(dir.File("whole.h5"), set).ok());
  ShowerFileWriterOptions options;
  options.layout = Layout::kVariableAngle3DGan;
  auto writer = ShowerFileWriter::Create(dir.File("streamed.h5"), options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->shape(), (std::array<int64_t, 3>{51, 51, 25}));
  ASSERT_TRUE((*writer)->Append(Slice(set, 0, 2)).ok());
  ASSERT_TRUE((*writer)->Append(Slice(set, 2, 4)).ok());
  ASSERT_TRUE((*writer)->Close().ok());

  absl::StatusOr<ShowerSet> read = ReadShowerFile(dir.File("streamed.h5"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->layout, Layout::kVariableAngle3DGan);
  EXPECT_EQ(read->cells, set.cells);
  EXPECT_EQ(read->energy_gev, set.energy_gev);
  EXPECT_EQ(read->theta_rad, set.theta_rad);
  // Every key WriteShowerFile writes, with the same values (the derived mtheta, eta, sum too).
  EXPECT_EQ(RunPython(dir.path(), absl::StrCat(R"(
import h5py, numpy as np
a = h5py.File(")",
                                               dir.File("whole.h5"), R"(", "r")
b = h5py.File(")",
                                               dir.File("streamed.h5"), R"(", "r")
assert sorted(a.keys()) == sorted(b.keys()) == ["ECAL", "energy", "eta", "mtheta", "sum", "theta"], list(b.keys())
for k in a.keys():
    assert a[k].shape == b[k].shape and b[k].dtype == np.float32, k
    assert np.array_equal(a[k][:], b[k][:]), k
)")),
            0);
}

TEST(ShowerFileWriterTest, FileIsReadableAfterEachAppend) {
  gantry::testing::TempDir dir;
  const ShowerSet set = Toy(Layout::kFixedAngle3DGan, 3, 4);
  auto writer = ShowerFileWriter::Create(dir.File("grow.h5"), {});
  ASSERT_TRUE(writer.ok());
  for (int64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*writer)->Append(Slice(set, i, 1)).ok());
    absl::StatusOr<DatasetInfo> info = InspectShowerFile(dir.File("grow.h5"));
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->events, i + 1);
  }
}

TEST(ShowerFileWriterTest, RefusesBadShowersAndUseAfterClose) {
  gantry::testing::TempDir dir;
  ShowerSet set = Toy(Layout::kFixedAngle3DGan, 2, 5);
  auto writer = ShowerFileWriter::Create(dir.File("bad.h5"), {});
  ASSERT_TRUE(writer.ok());
  ShowerSet negative = set;
  negative.cells[7] = -1.0f;
  absl::Status s = (*writer)->Append(negative);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("event 0 cell 7"));
  ShowerSet no_energy = set;
  no_energy.energy_gev[1] = 0.0f;
  EXPECT_EQ((*writer)->Append(no_energy).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*writer)->events(), 0);  // nothing half-appended
  const ShowerSet wide = Toy(Layout::kVariableAngle3DGan, 1, 5);
  EXPECT_EQ((*writer)->Append(wide).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*writer)->Append(set).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ((*writer)->Append(set).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadShowerFile(dir.File("bad.h5"))->events(), 2);

  ShowerFileWriterOptions variable;
  variable.layout = Layout::kVariableAngle3DGan;
  auto angled = ShowerFileWriter::Create(dir.File("angle.h5"), variable);
  ASSERT_TRUE(angled.ok());
  const ShowerSet one = Toy(Layout::kVariableAngle3DGan, 1, 6);
  EXPECT_EQ((*angled)->Append(one.cells.data(), 1, one.energy_gev.data(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShowerFileWriterTest, CreateErrors) {
  ShowerFileWriterOptions calo;
  calo.layout = Layout::kCaloChallenge;
  EXPECT_EQ(ShowerFileWriter::Create("/tmp/x.h5", calo).status().code(),
            absl::StatusCode::kInvalidArgument);
  ShowerFileWriterOptions muon;
  muon.particle = "Muon";
  EXPECT_EQ(ShowerFileWriter::Create("/tmp/x.h5", muon).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<ShowerFileWriter>> nowhere =
      ShowerFileWriter::Create("/nonexistent-dir/out.h5", {});
  ASSERT_FALSE(nowhere.ok());
  EXPECT_EQ(nowhere.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(nowhere.status().message(), HasSubstr("/nonexistent-dir/out.h5"));
}

}  // namespace
}  // namespace gantry::showers
