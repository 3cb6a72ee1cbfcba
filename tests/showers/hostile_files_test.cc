// Tests of the size bounds of showers/ on hostile files (written with the HDF5 C API in
// hostile_files.cc): each is refused with the right code and a message naming the problem and the
// display name, never the path, and without allocating what the file claims; the same through a
// file descriptor and an in-memory image; and the limits themselves.
#include "tests/showers/hostile_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>

#include "base/sanitizers.h"
#include "showers/hdf5_io.h"
#include "showers/shower_file_reader.h"
#include "showers/toy_mc.h"
#include "tests/support/temp_dir.h"

namespace gantry::testing {
namespace {

using showers::InspectOptions;

const TempDir& Dir() {
  static const TempDir dir;
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class HostileFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A file that makes the inspection allocate what it claims fails here instead of swapping.
    // Not under AddressSanitizer, which reserves terabytes of shadow memory up front (there, a huge
    // allocation returns null: sanitize.sh sets allocator_may_return_null=1).
    if (!kAddressSanitizer) {
      struct rlimit limit {
        size_t{4} << 30, size_t{4} << 30
      };
      setrlimit(RLIMIT_AS, &limit);
    }
    files_ = new std::vector<HostileFile>(WriteHostileFiles(Dir().path()));
  }
  static std::vector<HostileFile>* files_;
};
std::vector<HostileFile>* HostileFilesTest::files_ = nullptr;

TEST_F(HostileFilesTest, EveryHostileFileIsRefusedQuicklyNamingTheUsersFileNotThePath) {
  ASSERT_GE(files_->size(), 17u);
  for (const HostileFile& f : *files_) {
    SCOPED_TRACE(f.name + ": " + f.about);
    InspectOptions options;
    options.display_name = "users-" + f.name;
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = showers::InspectShowerFile(f.path, options).status();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(status.code(), f.code) << status;
    EXPECT_NE(status.message().find(f.fragment), std::string::npos) << status;
    EXPECT_NE(status.message().find("users-" + f.name), std::string::npos) << status;
    EXPECT_EQ(status.message().find(Dir().path()), std::string::npos) << status;
    EXPECT_LT(seconds, 2.0);
  }
}

TEST_F(HostileFilesTest, TheHugeChunkedFileIsSmallOnDisk) {
  for (const HostileFile& f : *files_) {
    if (f.name == "huge_chunked.h5") EXPECT_LT(ReadAll(f.path).size(), 8000u);
  }
}

TEST_F(HostileFilesTest, FdAndImageEntryPointsAnswerLikeThePath) {
  for (const HostileFile& f : *files_) {
    SCOPED_TRACE(f.name);
    InspectOptions options;
    options.display_name = f.name;
    const absl::Status by_path = showers::InspectShowerFile(f.path, options).status();
    const int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const absl::Status by_fd = showers::InspectShowerFd(fd, options).status();
    ::close(fd);
    const absl::Status by_image = showers::InspectShowerImage(ReadAll(f.path), options).status();
    EXPECT_EQ(by_fd.code(), by_path.code()) << by_fd;
    EXPECT_EQ(by_image.code(), by_path.code()) << by_image;
    EXPECT_NE(by_fd.message().find(f.fragment), std::string::npos) << by_fd;
    EXPECT_NE(by_image.message().find(f.fragment), std::string::npos) << by_image;
    EXPECT_EQ(by_fd.message().find("/proc/self/fd"), std::string::npos) << by_fd;
  }
}

TEST_F(HostileFilesTest, TheReaderAndReadShowerFileRefuseThemToo) {
  for (const HostileFile& f : *files_) {
    if (f.name == "zero_events.h5") continue;  // an empty file is readable, just not uploadable
    SCOPED_TRACE(f.name);
    EXPECT_FALSE(showers::ReadShowerFile(f.path).ok());
    auto reader = showers::ShowerFileReader::Open(f.path);
    if (!f.refused_when_read) {
      EXPECT_FALSE(reader.ok());
      continue;
    }
    ASSERT_TRUE(reader.ok()) << reader.status();
    absl::Status read = (*reader)->ReadEvents({1}).status();
    EXPECT_EQ(read.code(), f.code) << read;
    EXPECT_NE(read.message().find(f.fragment), std::string::npos) << read;
  }
}

TEST_F(HostileFilesTest, AGoodFilePassesByPathFdAndImageAndTheLimitsBind) {
  showers::ToyMcConfig config;
  config.events = 30;
  config.seed = 4;
  const std::string path = Dir().File("Ele_good.h5");
  ASSERT_TRUE(showers::WriteShowerFile(path, *showers::SimulateToyMc(config)).ok());
  absl::StatusOr<showers::DatasetInfo> info = showers::InspectShowerFile(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->events, 30);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  absl::StatusOr<showers::DatasetInfo> by_fd = showers::InspectShowerFd(fd);
  ::close(fd);
  ASSERT_TRUE(by_fd.ok()) << by_fd.status();
  EXPECT_EQ(by_fd->events, 30);
  EXPECT_DOUBLE_EQ(by_fd->total_deposit_gev, info->total_deposit_gev);
  InspectOptions named;
  named.display_name = "Gamma_mine.h5";
  absl::StatusOr<showers::DatasetInfo> by_image = showers::InspectShowerImage(ReadAll(path), named);
  ASSERT_TRUE(by_image.ok()) << by_image.status();
  EXPECT_EQ(by_image->events, 30);
  EXPECT_EQ(by_image->particle, "Gamma");  // from the display name

  InspectOptions few;
  few.limits.max_events = 29;
  absl::Status refused = showers::InspectShowerFile(path, few).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("at most 29"), std::string::npos) << refused;
  InspectOptions small;
  small.limits.max_dataset_bytes = 1000;
  refused = showers::InspectShowerFile(path, small).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("bytes uncompressed"), std::string::npos) << refused;
}

}  // namespace
}  // namespace gantry::testing
