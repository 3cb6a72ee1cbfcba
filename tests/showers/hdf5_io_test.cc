// Tests of showers/hdf5_io: round trips, files exchanged with h5py, and malformed files.
#include "showers/hdf5_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "showers/attribute_guard.h"
#include "showers/checked_file_driver.h"
#include "showers/hdf5_common.h"
#include "showers/shower_file_writer.h"
#include "showers/toy_mc.h"

namespace gantry::showers {
namespace {

// A path in a per-process directory (file names keep their particle prefix).
std::string TempPath(const std::string& name) {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "/gantry_data_test_" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0755);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(
          ::testing::TempDir() + "/gantry_data_test_" + std::to_string(::getpid()), ignored);
    });
    return d;
  }();
  return dir + "/" + name;
}

// Runs a Python script with arguments; returns its exit code and stdout.
std::pair<int, std::string> RunPython(const std::string& script, const std::string& args) {
  const std::string file = TempPath("script.py");
  {
    std::ofstream out(file);
    out << script;
  }
  const std::string cmd = std::string(GANTRY_PYTHON3) + " " + file + " " + args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) output.append(buf, n);
  const int status = ::pclose(pipe);
  return {WEXITSTATUS(status), output};
}

ShowerSet Toy(Layout layout, int64_t events, uint64_t seed) {
  ToyMcConfig c;
  c.layout = layout;
  c.events = events;
  c.seed = seed;
  c.energy_min_gev = 10;
  c.energy_max_gev = 200;
  absl::StatusOr<ShowerSet> s = SimulateToyMc(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

double Sum(const std::vector<float>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(Hdf5IoTest, FixedAngleRoundTripAndInspect) {
  const ShowerSet set = Toy(Layout::kFixedAngle3DGan, 12, 1);
  const std::string path = TempPath("EleEscan_rt.h5");
  ASSERT_TRUE(WriteShowerFile(path, set).ok());
  absl::StatusOr<ShowerSet> back = ReadShowerFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->layout, Layout::kFixedAngle3DGan);
  EXPECT_EQ(back->shape, set.shape);
  EXPECT_EQ(back->cells, set.cells);
  EXPECT_EQ(back->energy_gev, set.energy_gev);
  EXPECT_TRUE(back->theta_rad.empty());
  EXPECT_EQ(back->particle, "Ele");

  absl::StatusOr<DatasetInfo> info = InspectShowerFile(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->layout, Layout::kFixedAngle3DGan);
  EXPECT_EQ(info->events, 12);
  EXPECT_EQ(info->shape, (std::array<int64_t, 3>{25, 25, 25}));
  EXPECT_FLOAT_EQ(info->energy_min_gev,
                  *std::min_element(set.energy_gev.begin(), set.energy_gev.end()));
  EXPECT_FLOAT_EQ(info->energy_max_gev,
                  *std::max_element(set.energy_gev.begin(), set.energy_gev.end()));
  EXPECT_FALSE(info->has_theta);
  EXPECT_EQ(info->particle, "Ele");
  EXPECT_NEAR(info->total_deposit_gev, Sum(set.cells), 1e-6 * Sum(set.cells));
}

TEST(Hdf5IoTest, VariableAngleRoundTripAndSlice) {
  ShowerSet set = Toy(Layout::kVariableAngle3DGan, 6, 2);
  set.particle = "Gamma";
  const std::string path = TempPath("no_prefix_variable.h5");
  ASSERT_TRUE(WriteShowerFile(path, set).ok());
  absl::StatusOr<ShowerSet> back = ReadShowerFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->layout, Layout::kVariableAngle3DGan);
  EXPECT_EQ(back->shape, (std::array<int64_t, 3>{51, 51, 25}));
  EXPECT_EQ(back->cells, set.cells);
  EXPECT_EQ(back->theta_rad, set.theta_rad);
  EXPECT_EQ(back->particle, "Gamma");  // from the attribute: the name has no prefix

  absl::StatusOr<ShowerSet> slice = ReadShowerEvents(path, 2, 3);
  ASSERT_TRUE(slice.ok()) << slice.status();
  ASSERT_EQ(slice->events(), 3);
  EXPECT_EQ(slice->energy_gev[0], set.energy_gev[2]);
  EXPECT_EQ(slice->theta_rad[2], set.theta_rad[4]);
  EXPECT_TRUE(std::equal(slice->cells.begin(), slice->cells.end(), set.event(2)));
  absl::StatusOr<ShowerSet> tail = ReadShowerEvents(path, 5, 100);  // clipped at the end
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->events(), 1);

  absl::StatusOr<DatasetInfo> info = InspectShowerFile(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->has_theta);
  EXPECT_FLOAT_EQ(info->theta_min_rad,
                  *std::min_element(set.theta_rad.begin(), set.theta_rad.end()));
  EXPECT_FLOAT_EQ(info->theta_max_rad,
                  *std::max_element(set.theta_rad.begin(), set.theta_rad.end()));
}

ShowerSet CaloChallengeSet(int64_t events) {
  ShowerSet s;
  s.layout = Layout::kCaloChallenge;
  s.shape = {45, 16, 9};
  s.cells.resize(events * s.cells_per_event());
  for (size_t i = 0; i < s.cells.size(); ++i) s.cells[i] = (i % 7 == 0) ? 0.001f * (i % 13) : 0.0f;
  for (int64_t i = 0; i < events; ++i) s.energy_gev.push_back(1.0f + 10.0f * i);
  return s;
}

TEST(Hdf5IoTest, CaloChallengeConvertsMeV) {
  const ShowerSet set = CaloChallengeSet(4);
  const std::string path = TempPath("calo_rt.h5");
  ASSERT_TRUE(WriteShowerFile(path, set).ok());
  absl::StatusOr<ShowerSet> back = ReadShowerFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->layout, Layout::kCaloChallenge);
  EXPECT_EQ(back->shape, (std::array<int64_t, 3>{45, 16, 9}));
  ASSERT_EQ(back->cells.size(), set.cells.size());
  for (size_t i = 0; i < set.cells.size(); ++i) {
    ASSERT_NEAR(back->cells[i], set.cells[i], 1e-6f * set.cells[i] + 1e-12f) << i;
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(back->energy_gev[i], set.energy_gev[i], 1e-5f);
  // h5py sees MeV, shape (N, 6480), (N, 1) energies, gzip.
  auto [rc, out] = RunPython(R"(
import sys, h5py
f = h5py.File(sys.argv[1], 'r')
s, e = f['showers'], f['incident_energies']
assert s.shape == (4, 6480), s.shape
assert e.shape == (4, 1), e.shape
assert s.compression == 'gzip', s.compression
print(float(e[3, 0]), float(s[:].sum()))
)",
                             path);
  ASSERT_EQ(rc, 0) << out;
  std::vector<std::string> parts = absl::StrSplit(out, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  ASSERT_EQ(parts.size(), 2u) << out;
  double e3 = 0, total = 0;
  ASSERT_TRUE(absl::SimpleAtod(parts[0], &e3) && absl::SimpleAtod(parts[1], &total));
  EXPECT_NEAR(e3, 31000.0, 0.1);  // 31 GeV in MeV
  EXPECT_NEAR(total, 1000.0 * Sum(set.cells), 1e-4 * 1000.0 * Sum(set.cells));
}

TEST(Hdf5IoTest, H5pyReads3DGanFilesWeWrite) {
  const ShowerSet fixed = Toy(Layout::kFixedAngle3DGan, 5, 3);
  const ShowerSet variable = Toy(Layout::kVariableAngle3DGan, 4, 4);
  const std::string fixed_path = TempPath("EleEscan_h5py.h5");
  const std::string variable_path = TempPath("variable_h5py.h5");
  WriteOptions with_hcal;
  with_hcal.write_hcal = true;
  ASSERT_TRUE(WriteShowerFile(fixed_path, fixed, with_hcal).ok());
  ASSERT_TRUE(WriteShowerFile(variable_path, variable).ok());
  // What the Python reference implementations do: X = f['ECAL'], energy = f['target'][:, 1]
  // (fixed), f['energy'] and f['theta'] / f['mtheta'] (variable).
  auto [rc, out] = RunPython(R"(
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], 'r')
x = np.array(f['ECAL']); y = np.array(f['target'])[:, 1]
assert x.shape == (5, 25, 25, 25) and x.dtype == np.float32, (x.shape, x.dtype)
assert f['HCAL'].shape == (5, 5, 5, 60)
print(repr(float(x.astype(np.float64).sum())), repr(float(y.astype(np.float64).sum())), repr(float(x[2, 12, 12, 10])))
g = h5py.File(sys.argv[2], 'r')
x = np.array(g['ECAL']); e = np.array(g['energy']); t = np.array(g['theta']); m = np.array(g['mtheta'])
assert x.shape == (4, 51, 51, 25), x.shape
assert e.shape == (4,) and t.shape == (4,) and m.shape == (4,)
assert np.allclose(np.array(g['sum']), x.sum(axis=(1, 2, 3)), rtol=1e-4)
assert np.all(np.abs(m - t) < 0.2), (m, t)
print(repr(float(t.astype(np.float64).sum())), g.attrs['particle'].decode() if isinstance(g.attrs['particle'], bytes) else g.attrs['particle'])
)",
                             fixed_path + " " + variable_path);
  ASSERT_EQ(rc, 0) << out;
  std::vector<std::string> parts = absl::StrSplit(out, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  ASSERT_EQ(parts.size(), 5u) << out;
  double cells = 0, energies = 0, one_cell = 0, thetas = 0;
  ASSERT_TRUE(absl::SimpleAtod(parts[0], &cells));
  ASSERT_TRUE(absl::SimpleAtod(parts[1], &energies));
  ASSERT_TRUE(absl::SimpleAtod(parts[2], &one_cell));
  ASSERT_TRUE(absl::SimpleAtod(parts[3], &thetas));
  EXPECT_NEAR(cells, Sum(fixed.cells), 1e-9 * Sum(fixed.cells));
  EXPECT_NEAR(energies, Sum(fixed.energy_gev), 1e-9 * Sum(fixed.energy_gev));
  EXPECT_EQ(static_cast<float>(one_cell), fixed.event(2)[(12 * 25 + 12) * 25 + 10]);
  EXPECT_NEAR(thetas, Sum(variable.theta_rad), 1e-6);
  EXPECT_EQ(parts[4], "Ele");
}

TEST(Hdf5IoTest, ReadsH5pyWrittenFloat64Files) {
  const std::string fixed_path = TempPath("Pi0Escan_py.h5");
  const std::string calo_path = TempPath("calo_py.h5");
  const std::string variable_path = TempPath("ChPi_var_py.h5");
  auto [rc, out] = RunPython(R"(
import sys, h5py, numpy as np
n = 3
i, x, y, z = np.meshgrid(np.arange(n), np.arange(25), np.arange(25), np.arange(25), indexing='ij')
with h5py.File(sys.argv[1], 'w') as f:
    f['ECAL'] = ((i + 1) * 1e-3 * (x + 2 * y + 3 * z)).astype(np.float64)
    f['HCAL'] = np.zeros((n, 5, 5, 60))
    f['target'] = np.stack([np.full(n, 111.0), 10.0 + np.arange(n), np.zeros(n), np.zeros(n)], axis=1)
with h5py.File(sys.argv[2], 'w') as f:
    f.create_dataset('incident_energies', data=np.array([[1000.0], [2000.0]]), compression='gzip')
    f.create_dataset('showers', data=np.arange(2 * 40500, dtype=np.float64).reshape(2, 40500) * 1e-3, compression='gzip')
with h5py.File(sys.argv[3], 'w') as f:
    f['ECAL'] = np.ones((2, 51, 51, 25), dtype=np.float32)
    f['energy'] = np.array([100.0, 150.0])
    f['mtheta'] = np.array([1.2, 1.9])
)",
                             fixed_path + " " + calo_path + " " + variable_path);
  ASSERT_EQ(rc, 0) << out;

  absl::StatusOr<ShowerSet> fixed = ReadShowerFile(fixed_path);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->particle, "Pi0");
  ASSERT_EQ(fixed->events(), 3);
  EXPECT_EQ(fixed->energy_gev, (std::vector<float>{10, 11, 12}));
  for (int i = 0; i < 3; ++i) {
    for (int x : {0, 7, 24}) {
      for (int z : {0, 13, 24}) {
        const int y = 5;
        EXPECT_FLOAT_EQ(fixed->event(i)[(x * 25 + y) * 25 + z],
                        static_cast<float>((i + 1) * 1e-3 * (x + 2 * y + 3 * z)));
      }
    }
  }
  absl::StatusOr<DatasetInfo> info = InspectShowerFile(fixed_path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->particle, "Pi0");
  EXPECT_DOUBLE_EQ(info->energy_min_gev, 10.0);
  EXPECT_DOUBLE_EQ(info->energy_max_gev, 12.0);

  absl::StatusOr<ShowerSet> calo = ReadShowerFile(calo_path);
  ASSERT_TRUE(calo.ok()) << calo.status();
  EXPECT_EQ(calo->shape, (std::array<int64_t, 3>{45, 50, 18}));
  EXPECT_EQ(calo->energy_gev, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_FLOAT_EQ(calo->cells[40500 + 17], static_cast<float>((40500 + 17) * 1e-3 * 1e-3));

  absl::StatusOr<ShowerSet> variable = ReadShowerFile(variable_path);
  ASSERT_TRUE(variable.ok()) << variable.status();
  EXPECT_EQ(variable->particle, "ChPi");
  EXPECT_EQ(variable->layout, Layout::kVariableAngle3DGan);
  EXPECT_EQ(variable->theta_rad, (std::vector<float>{1.2f, 1.9f}));  // mtheta when theta is absent
}

// Writes a malformed file with h5py and expects `code` with every fragment in the message.
void ExpectBadFile(const std::string& name, const std::string& python_body, absl::StatusCode code,
                   const std::vector<std::string>& fragments) {
  const std::string path = TempPath(name);
  auto [rc, out] = RunPython("import sys, h5py, numpy as np\nf = h5py.File(sys.argv[1], 'w')\n" +
                                 python_body + "\nf.close()\n",
                             path);
  ASSERT_EQ(rc, 0) << out;
  for (bool inspect : {false, true}) {
    absl::Status status =
        inspect ? InspectShowerFile(path).status() : ReadShowerFile(path).status();
    EXPECT_EQ(status.code(), code) << name << ": " << status;
    EXPECT_NE(status.message().find(path), std::string::npos) << status;
    for (const std::string& f : fragments) {
      EXPECT_NE(status.message().find(f), std::string::npos) << "'" << f << "' not in " << status;
    }
  }
}

TEST(Hdf5IoTest, MalformedFilesNameFileDatasetAndProblem) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  ExpectBadFile("no_keys.h5", "f['X'] = np.zeros(3)", kInvalid, {"no known layout"});
  ExpectBadFile("ecal_only.h5", "f['ECAL'] = np.zeros((2, 25, 25, 25))", kInvalid,
                {"'target'", "'energy'"});
  ExpectBadFile("bad_shape.h5",
                "f['ECAL'] = np.zeros((2, 25, 25, 20))\nf['target'] = np.ones((2, 4))", kInvalid,
                {"'ECAL'", "(2,25,25,20)"});
  ExpectBadFile("bad_rank.h5", "f['ECAL'] = np.zeros((2, 25, 25, 25))\nf['target'] = np.ones(2)",
                kInvalid, {"'target'", "(2)"});
  ExpectBadFile("count_mismatch.h5",
                "f['ECAL'] = np.zeros((2, 25, 25, 25))\nf['target'] = np.ones((3, 4))", kInvalid,
                {"'target'", "3 events"});
  ExpectBadFile("nan_cell.h5",
                "e = np.zeros((3, 25, 25, 25)); e[1, 4, 5, 6] = np.nan\nf['ECAL'] = e\n"
                "f['target'] = np.ones((3, 4))",
                kInvalid, {"'ECAL'", "event 1 cell (4,5,6)", "NaN"});
  ExpectBadFile("negative_cell.h5",
                "e = np.zeros((3, 51, 51, 25)); e[2, 0, 0, 3] = -0.5\nf['ECAL'] = e\n"
                "f['energy'] = np.ones(3)\nf['theta'] = np.ones(3)",
                kInvalid, {"'ECAL'", "event 2", "negative"});
  ExpectBadFile("negative_energy.h5",
                "f['ECAL'] = np.zeros((2, 25, 25, 25))\nf['target'] = np.array([[0, 5, 0, 0], "
                "[0, -1, 0, 0]])",
                kInvalid, {"'target'", "event 1"});
  ExpectBadFile("no_theta.h5", "f['ECAL'] = np.zeros((2, 51, 51, 25))\nf['energy'] = np.ones(2)",
                kInvalid, {"'theta'"});
  ExpectBadFile("calo_voxels.h5",
                "f['showers'] = np.zeros((2, 1000))\nf['incident_energies'] = np.ones((2, 1))",
                kInvalid, {"'showers'", "1000 voxels"});
  ExpectBadFile("calo_missing.h5", "f['showers'] = np.zeros((2, 6480))", kInvalid,
                {"'incident_energies'"});
  ExpectBadFile("strings.h5", "f['ECAL'] = np.array([b'a', b'b'])\nf['target'] = np.ones((2, 4))",
                kInvalid, {"'ECAL'", "not numeric"});
  // Sizes claimed by the file but never written (chunks read back as fill values) are refused
  // before anything is allocated for them: 2^36 events in a 2 KB file, a 2^40-wide energy table.
  ExpectBadFile("never_written.h5",
                "f.create_dataset('ECAL', shape=(2**36, 25, 25, 25), dtype='f4', "
                "chunks=(1, 25, 25, 25))\n"
                "f.create_dataset('target', shape=(2**36, 4), dtype='f4', chunks=(1024, 4))",
                kInvalid, {"'ECAL'", "68719476736 events"});
  ExpectBadFile("wide_target.h5",
                "f['ECAL'] = np.zeros((2, 25, 25, 25))\n"
                "f.create_dataset('target', shape=(2, 2**40), dtype='f4', chunks=(1, 1024))",
                kInvalid, {"'target'", "(2,1099511627776)"});
}

TEST(Hdf5IoTest, MissingNotHdf5AndTruncatedFiles) {
  EXPECT_EQ(ReadShowerFile(TempPath("does_not_exist.h5")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string text = TempPath("text.h5");
  std::ofstream(text) << "not hdf5 at all\n";
  absl::Status not_hdf5 = InspectShowerFile(text).status();
  EXPECT_EQ(not_hdf5.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_hdf5.message().find("not an HDF5 file"), std::string::npos) << not_hdf5;

  // A valid uncompressed file cut in half: the data behind the header is gone.
  const ShowerSet set = Toy(Layout::kFixedAngle3DGan, 40, 5);
  const std::string path = TempPath("EleEscan_truncated.h5");
  WriteOptions plain;
  plain.gzip_level = 0;
  ASSERT_TRUE(WriteShowerFile(path, set, plain).ok());
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 40u * 25 * 25 * 25 * 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size() / 2);
  for (bool inspect : {false, true}) {
    absl::Status status =
        inspect ? InspectShowerFile(path).status() : ReadShowerFile(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_NE(status.message().find(path), std::string::npos) << status;
  }
}

TEST(Hdf5IoTest, CorruptedCompressedDataNamesTheDataset) {
  // Garbage in the middle of a gzip file hits chunk data (most of the file): the header and the
  // keys are fine, inflating a chunk of ECAL fails.
  const ShowerSet set = Toy(Layout::kFixedAngle3DGan, 200, 7);
  const std::string path = TempPath("EleEscan_corrupted.h5");
  ASSERT_TRUE(WriteShowerFile(path, set).ok());
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  const std::string garbage(4096, '\xff');
  f.seekp(size / 2);
  f.write(garbage.data(), garbage.size());
  f.close();
  for (bool inspect : {false, true}) {
    absl::Status status =
        inspect ? InspectShowerFile(path).status() : ReadShowerFile(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_NE(status.message().find(path), std::string::npos) << status;
    EXPECT_NE(status.message().find("'ECAL'"), std::string::npos) << status;
  }
}

// No timestamps in the files: the same showers written twice, a second apart, give the same bytes
// (so a toy MC sample has one SHA-256 on every worker).
TEST(Hdf5IoTest, TheSameShowersGiveTheSameBytes) {
  const ShowerSet set = Toy(Layout::kFixedAngle3DGan, 8, 3);
  auto write_both = [&](const std::string& name) {
    ASSERT_TRUE(WriteShowerFile(TempPath(name + "_plain.h5"), set).ok());
    ShowerFileWriterOptions options;
    options.gzip_level = 0;
    options.chunk_events = 1;
    absl::StatusOr<std::unique_ptr<ShowerFileWriter>> writer =
        ShowerFileWriter::Create(TempPath(name + "_appended.h5"), options);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Append(set).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  };
  write_both("first");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // HDF5 times have 1 s steps
  write_both("second");
  auto bytes = [](const std::string& name) {
    std::ifstream in(TempPath(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes("first_plain.h5"), bytes("second_plain.h5"));
  EXPECT_EQ(bytes("first_appended.h5"), bytes("second_appended.h5"));
  EXPECT_GT(bytes("first_appended.h5").size(), 8u * 25 * 25 * 25 * 4);
}

TEST(Hdf5IoTest, WriterRejectsInconsistentSets) {
  ShowerSet set = Toy(Layout::kVariableAngle3DGan, 2, 6);
  set.theta_rad.pop_back();
  EXPECT_EQ(WriteShowerFile(TempPath("bad_write.h5"), set).code(),
            absl::StatusCode::kInvalidArgument);
  ShowerSet fixed = Toy(Layout::kFixedAngle3DGan, 2, 6);
  fixed.cells.pop_back();
  EXPECT_EQ(WriteShowerFile(TempPath("bad_write.h5"), fixed).code(),
            absl::StatusCode::kInvalidArgument);
}

// A 3DGAN file of 2 events written with the HDF5 C API, in the object-header `latest` format when
// asked, with a user block of `user_block` bytes and dense attribute storage from the first
// attribute when `dense`; the root group gets the attributes `add` writes.
template <typename AddAttributes>
std::string WriteWithAttributes(const std::string& name, bool latest, hsize_t user_block,
                                bool dense, AddAttributes add) {
  const std::string path = TempPath(name);
  const hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (user_block > 0) H5Pset_userblock(fcpl, user_block);
  if (latest) H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  if (dense) H5Pset_attr_phase_change(fcpl, 0, 0);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  EXPECT_GE(file, 0);
  const hsize_t cells[4] = {2, 25, 25, 25}, target_dims[2] = {2, 4};
  const std::vector<float> ones(2 * 25 * 25 * 25, 0.5f), target(8, 50.0f);
  for (auto [ds_name, dims, rank, data] : {std::tuple{"ECAL", cells, 4, ones.data()},
                                           std::tuple{"target", target_dims, 2, target.data()}}) {
    const hid_t space = H5Screate_simple(rank, dims, nullptr);
    const hid_t ds =
        H5Dcreate2(file, ds_name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
    H5Dclose(ds);
    H5Sclose(space);
  }
  add(file);
  H5Fclose(file);
  H5Pclose(fcpl);
  H5Pclose(fapl);
  return path;
}

// An attribute `name` of `type` over `points` points (a scalar when 0) holding `value`.
void AddAttribute(hid_t file, const char* name, hid_t type, hsize_t points, const void* value) {
  const hid_t space = points == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &points, nullptr);
  const hid_t attr = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(H5Awrite(attr, type, value), 0) << name;
  H5Aclose(attr);
  H5Sclose(space);
}

void AddStringAttribute(hid_t file, const char* name, const std::string& value,
                        hsize_t points = 0) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size());
  const std::string values = points == 0 ? value : [&] {
    std::string all;
    for (hsize_t i = 0; i < points; ++i) all += value;
    return all;
  }();
  AddAttribute(file, name, type, points, values.data());
  H5Tclose(type);
}

// Every kind of attribute the check reads, beside the particle.
void AddManyAttributes(hid_t file) {
  AddStringAttribute(file, "particle", "Pi0");
  const char* note = "written by a test";
  const hid_t vlen = H5Tcopy(H5T_C_S1);
  H5Tset_size(vlen, H5T_VARIABLE);
  AddAttribute(file, "note", vlen, 0, &note);
  H5Tclose(vlen);
  const int32_t version[3] = {1, 2, 3};
  AddAttribute(file, "version", H5T_STD_I32LE, 3, version);
  const double scale = 1e-3;
  AddAttribute(file, "scale", H5T_IEEE_F64BE, 0, &scale);
  const hid_t null_space = H5Screate(H5S_NULL);
  H5Aclose(H5Acreate2(file, "empty", H5T_STD_U8LE, null_space, H5P_DEFAULT, H5P_DEFAULT));
  H5Sclose(null_space);
}

// Opens `path` as the showers library does (the checked driver) and checks its root group.
h5::AttributeCheck RootAttributes(const std::string& path) {
  h5::LibraryLock lock;
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  EXPECT_GE(h5::UseCheckedFileDriver(fapl.get()), 0);
  h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  EXPECT_TRUE(file.ok()) << path;
  return h5::CheckAttributeMessages(file.get());
}

h5::AttributeVerdict RootAttributeVerdict(const std::string& path) {
  return RootAttributes(path).verdict;
}

TEST(ParticleAttributeTest, EveryHeaderFormatAndAttributeKindIsCheckedAndTheParticleRead) {
  for (bool latest : {false, true}) {
    for (hsize_t user_block : {hsize_t{0}, hsize_t{1024}}) {
      SCOPED_TRACE(::testing::Message()
                   << "latest format " << latest << ", user block " << user_block);
      const std::string path =
          WriteWithAttributes("plain.h5", latest, user_block, false, AddManyAttributes);
      const h5::AttributeCheck check = RootAttributes(path);
      EXPECT_EQ(check.verdict, h5::AttributeVerdict::kChecked) << check.detail;
      EXPECT_EQ(check.attributes, 5);  // every one found, in the first chunk or a continuation
      absl::StatusOr<DatasetInfo> info = InspectShowerFile(path);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->particle, "Pi0");
    }
  }
  // The files gantry writes.
  const std::string path = TempPath("written.h5");
  ShowerSet set = Toy(Layout::kFixedAngle3DGan, 3, 5);
  set.particle = "Gamma";
  ASSERT_TRUE(WriteShowerFile(path, set).ok());
  EXPECT_EQ(RootAttributes(path).attributes, 1);
  EXPECT_EQ(RootAttributeVerdict(path), h5::AttributeVerdict::kChecked);
}

TEST(ParticleAttributeTest, AHeaderTheCheckDoesNotReadLeavesTheParticleUnknown) {
  // Dense attribute storage (a fractal heap) and a compound attribute are not read by the check:
  // no H5A function is called, the file is accepted and its particle is unknown.
  const std::string dense = WriteWithAttributes("dense.h5", true, 0, true, AddManyAttributes);
  EXPECT_EQ(RootAttributeVerdict(dense), h5::AttributeVerdict::kUnchecked);
  const std::string compound = WriteWithAttributes("compound.h5", false, 0, false, [](hid_t file) {
    AddStringAttribute(file, "particle", "Pi0");
    const hid_t type = H5Tcreate(H5T_COMPOUND, 8);
    H5Tinsert(type, "a", 0, H5T_NATIVE_FLOAT);
    H5Tinsert(type, "b", 4, H5T_NATIVE_FLOAT);
    const float ab[2] = {1, 2};
    AddAttribute(file, "pair", type, 0, ab);
    H5Tclose(type);
  });
  EXPECT_EQ(RootAttributeVerdict(compound), h5::AttributeVerdict::kUnchecked);
  for (const std::string& path : {dense, compound}) {
    absl::StatusOr<DatasetInfo> info = InspectShowerFile(path);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->particle, "");
  }
}

TEST(ParticleAttributeTest, OnlyAScalarStringOfAtMost256BytesIsTheParticle) {
  // H5Aread writes every point: a particle of 4 strings would not fit one string's buffer.
  const std::string array = WriteWithAttributes("array.h5", false, 0, false, [](hid_t file) {
    AddStringAttribute(file, "particle", "Pi0", 4);
  });
  const std::string long_name = WriteWithAttributes("long.h5", false, 0, false, [](hid_t file) {
    AddStringAttribute(file, "particle", std::string(300, 'x'));
  });
  for (const std::string& path : {array, long_name}) {
    EXPECT_EQ(RootAttributeVerdict(path), h5::AttributeVerdict::kChecked);
    absl::StatusOr<DatasetInfo> info = InspectShowerFile(path);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->particle, "");
  }
}

TEST(Hdf5IoTest, ParticleFromFileNamePrefix) {
  EXPECT_EQ(ParticleFromFileName("/data/EleEscan_1_1.h5"), "Ele");
  EXPECT_EQ(ParticleFromFileName("Pi0Escan_2_3.h5"), "Pi0");
  EXPECT_EQ(ParticleFromFileName("x/ChPiEscan_1.h5"), "ChPi");
  EXPECT_EQ(ParticleFromFileName("GammaEscan_1.h5"), "Gamma");
  EXPECT_EQ(ParticleFromFileName("/Ele/dataset_1.h5"), "");
}

}  // namespace
}  // namespace gantry::showers
