// Tests of showers/shower_file_reader: random access to lists of events in the three layouts
// (gzip-chunked and contiguous), agreement with ReadShowerFile, bad indices and bad cells, and
// concurrent readers.
#include "showers/shower_file_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"
#include "tests/support/temp_dir.h"

namespace gantry::showers {
namespace {

// A file in this test process's private directory (removed at exit).
std::string TempPath(const std::string& name) {
  static const ::gantry::testing::TempDir dir;
  return dir.File(name);
}

ShowerSet Toy(Layout layout, int64_t events, uint64_t seed) {
  ToyMcConfig c;
  c.layout = layout;
  c.events = events;
  c.seed = seed;
  c.energy_min_gev = 10;
  c.energy_max_gev = 200;
  c.threads = 2;
  absl::StatusOr<ShowerSet> s = SimulateToyMc(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// CaloChallenge dataset 2 layout: 45x16x9 voxels, energies 10 + 7 i GeV, a few cells per event.
ShowerSet CaloChallengeSet(int64_t events) {
  ShowerSet s;
  s.layout = Layout::kCaloChallenge;
  s.shape = {45, 16, 9};
  s.cells.assign(static_cast<size_t>(events * s.cells_per_event()), 0.0f);
  for (int64_t i = 0; i < events; ++i) {
    s.energy_gev.push_back(10.0f + 7.0f * static_cast<float>(i));
    for (int64_t c = 0; c < 50; ++c)
      s.mutable_event(i)[(i * 131 + c * 97) % 6480] = 0.01f * (c + 1);
  }
  return s;
}

// Event `i` of `set` equals event `k` of `got` (cells, energy, angle).
void ExpectSameEvent(const ShowerSet& set, int64_t i, const ShowerSet& got, int64_t k,
                     float tolerance = 0.0f) {
  const int64_t cells = set.cells_per_event();
  for (int64_t c = 0; c < cells; ++c) {
    ASSERT_NEAR(got.event(k)[c], set.event(i)[c], tolerance * set.event(i)[c])
        << "event " << i << " cell " << c;
  }
  EXPECT_NEAR(got.energy_gev[k], set.energy_gev[i], tolerance * set.energy_gev[i]);
  if (!set.theta_rad.empty()) EXPECT_EQ(got.theta_rad[k], set.theta_rad[i]);
}

struct LayoutCase {
  std::string name;
  Layout layout;
  int gzip;
};

void PrintTo(const LayoutCase& c, std::ostream* os) { *os << c.name; }

class ReaderLayoutTest : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(ReaderLayoutTest, ReadsAnyListOfEventsAsReadShowerFileDoes) {
  const LayoutCase& p = GetParam();
  const ShowerSet set =
      p.layout == Layout::kCaloChallenge ? CaloChallengeSet(9) : Toy(p.layout, 9, 3);
  const std::string path = TempPath(p.name + ".h5");
  WriteOptions write;
  write.gzip_level = p.gzip;
  ASSERT_TRUE(WriteShowerFile(path, set, write).ok());
  absl::StatusOr<ShowerSet> whole = ReadShowerFile(path);
  ASSERT_TRUE(whole.ok()) << whole.status();

  auto reader = ShowerFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const ShowerFileReader& r = **reader;
  EXPECT_EQ(r.layout(), p.layout);
  EXPECT_EQ(r.shape(), set.shape);
  EXPECT_EQ(r.events(), 9);
  EXPECT_EQ(r.energy_gev(), whole->energy_gev);
  EXPECT_EQ(r.theta_rad(), whole->theta_rad);
  EXPECT_EQ(r.particle(), whole->particle);

  // Out of order, a run of consecutive events, a repeat, the last event.
  const std::vector<int64_t> indices = {7, 2, 3, 4, 0, 3, 8};
  absl::StatusOr<ShowerSet> got = r.ReadEvents(indices);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->layout, p.layout);
  EXPECT_EQ(got->shape, set.shape);
  ASSERT_EQ(got->events(), static_cast<int64_t>(indices.size()));
  for (size_t k = 0; k < indices.size(); ++k) {
    // Exactly ReadShowerFile's values (MeV -> GeV included) ...
    ExpectSameEvent(*whole, indices[k], *got, static_cast<int64_t>(k));
    // ... which are the written ones (up to the MeV round trip for CaloChallenge).
    ExpectSameEvent(set, indices[k], *got, static_cast<int64_t>(k), 1e-6f);
  }
  absl::StatusOr<ShowerSet> none = r.ReadEvents({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->events(), 0);

  // A sequential pass in small blocks visits every event once, in order.
  int64_t next = 0;
  ASSERT_TRUE(r.ForEachBlock(1, [&](int64_t first, const ShowerSet& block) {
                 EXPECT_EQ(first, next);
                 for (int64_t k = 0; k < block.events(); ++k) {
                   ExpectSameEvent(*whole, first + k, block, k);
                 }
                 next += block.events();
                 return absl::OkStatus();
               }).ok());
  EXPECT_EQ(next, 9);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ReaderLayoutTest,
    ::testing::Values(LayoutCase{"EleFixedGzip", Layout::kFixedAngle3DGan, 4},
                      LayoutCase{"EleFixedContiguous", Layout::kFixedAngle3DGan, 0},
                      LayoutCase{"EleVariableGzip", Layout::kVariableAngle3DGan, 4},
                      LayoutCase{"CaloChallengeGzip", Layout::kCaloChallenge, 4}),
    [](const ::testing::TestParamInfo<LayoutCase>& info) { return info.param.name; });

TEST(ShowerFileReaderTest, BadIndicesAreOutOfRangeAndNameTheIndex) {
  const std::string path = TempPath("EleBad.h5");
  ASSERT_TRUE(WriteShowerFile(path, Toy(Layout::kFixedAngle3DGan, 4, 5)).ok());
  auto reader = ShowerFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (int64_t bad : {int64_t{4}, int64_t{-1}, std::numeric_limits<int64_t>::max()}) {
    absl::StatusOr<ShowerSet> got = (*reader)->ReadEvents({0, bad});
    EXPECT_EQ(got.status().code(), absl::StatusCode::kOutOfRange) << bad;
    EXPECT_NE(got.status().message().find(std::to_string(bad)), std::string::npos) << got.status();
    EXPECT_NE(got.status().message().find(path), std::string::npos) << got.status();
  }
}

TEST(ShowerFileReaderTest, BadCellIsFoundWhenItsEventIsRead) {
  ShowerSet set = Toy(Layout::kFixedAngle3DGan, 5, 6);
  set.mutable_event(3)[17] = std::nanf("");
  const std::string path = TempPath("EleNaN.h5");
  ASSERT_TRUE(WriteShowerFile(path, set).ok());
  auto reader = ShowerFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->ReadEvents({0, 1, 4}).ok());
  absl::StatusOr<ShowerSet> got = (*reader)->ReadEvents({1, 3});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("event 3"), std::string::npos) << got.status();
  EXPECT_NE(got.status().message().find("NaN"), std::string::npos) << got.status();
}

TEST(ShowerFileReaderTest, MissingAndForeignFiles) {
  EXPECT_EQ(ShowerFileReader::Open(TempPath("nope.h5")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string text = TempPath("text.h5");
  {
    std::FILE* f = std::fopen(text.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("not hdf5 at all", f);
    std::fclose(f);
  }
  absl::StatusOr<std::unique_ptr<ShowerFileReader>> r = ShowerFileReader::Open(text);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not an HDF5 file"), std::string::npos) << r.status();
}

TEST(ShowerFileReaderTest, ConcurrentReadersGetTheirOwnEvents) {
  const ShowerSet set = Toy(Layout::kFixedAngle3DGan, 24, 8);
  const std::string path = TempPath("EleThreads.h5");
  ASSERT_TRUE(WriteShowerFile(path, set).ok());
  auto reader = ShowerFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        const std::vector<int64_t> indices = {(t * 5 + round) % 24, (t * 7 + round * 3) % 24};
        absl::StatusOr<ShowerSet> got = (*reader)->ReadEvents(indices);
        if (!got.ok()) {
          ++failures[t];
          continue;
        }
        for (size_t k = 0; k < indices.size(); ++k) {
          for (int64_t c = 0; c < set.cells_per_event(); ++c) {
            if (got->event(static_cast<int64_t>(k))[c] != set.event(indices[k])[c]) {
              ++failures[t];
              break;
            }
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace gantry::showers
