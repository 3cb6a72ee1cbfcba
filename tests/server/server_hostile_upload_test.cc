// Hostile uploads against a real gantry-server: every hostile HDF5 file (tests/showers/
// hostile_files.cc) is refused with INVALID_ARGUMENT naming the client's file name and no server
// path, nothing is stored and the server keeps answering; and the sandbox: an inspection child that
// runs out of memory, crashes, spins, sleeps, floods or lies costs that child only.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "base/sanitizers.h"
#include "base/sha256.h"
#include "showers/hdf5_io.h"
#include "showers/sandboxed_inspector.h"
#include "showers/toy_mc.h"
#include "tests/server/server_fixture.h"
#include "tests/showers/hostile_files.h"
#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class ServerHostileUploadTest : public ServerFixture {
 protected:
  grpc::Status Upload(const std::string& token, const std::string& name,
                      const std::string& file_name, const std::string& bytes,
                      v1::Dataset* dataset = nullptr) {
    v1::Dataset ignored;
    auto ctx = Ctx(token, 30000);
    auto writer = datasets_->UploadDataset(ctx.get(), dataset ? dataset : &ignored);
    v1::UploadDatasetRequest header;
    header.mutable_header()->set_name(name);
    header.mutable_header()->set_size_bytes(bytes.size());
    header.mutable_header()->set_sha256(gantry::Sha256Hex(bytes));
    header.mutable_header()->set_file_name(file_name);
    writer->Write(header);
    for (size_t at = 0; at < bytes.size(); at += 64 * 1024) {
      v1::UploadDatasetRequest chunk;
      chunk.set_chunk(bytes.substr(at, 64 * 1024));
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  std::string GoodFile() {
    showers::ToyMcConfig config;
    config.events = 6;
    config.seed = 9;
    const std::string path = dir_.File("Ele_good.h5");
    EXPECT_TRUE(showers::WriteShowerFile(path, *showers::SimulateToyMc(config)).ok());
    return ReadAll(path);
  }

  // The message names the client's file and no server path.
  void ExpectNoServerPath(const grpc::Status& s) {
    EXPECT_EQ(s.error_message().find(dir_.path()), std::string::npos) << Describe(s);
    EXPECT_EQ(s.error_message().find("blobs/"), std::string::npos) << Describe(s);
    EXPECT_EQ(s.error_message().find("/proc/"), std::string::npos) << Describe(s);
    EXPECT_EQ(s.error_message().find("/tmp/"), std::string::npos) << Describe(s);
  }
};

TEST_F(ServerHostileUploadTest, EveryHostileFileIsInvalidArgumentNamingTheClientsFileOnly) {
  const std::string alice = NewTenant("alice");
  const std::vector<HostileFile> files = WriteHostileFiles(dir_.path());
  ASSERT_GE(files.size(), 17u);
  int n = 0;
  for (const HostileFile& f : files) {
    SCOPED_TRACE(f.name + ": " + f.about);
    const std::string client_name = "my-" + f.name;
    grpc::Status s = Upload(alice, "hostile-" + std::to_string(n++), client_name, ReadAll(f.path));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
    EXPECT_NE(s.error_message().find(client_name), std::string::npos) << Describe(s);
    EXPECT_NE(s.error_message().find(f.fragment), std::string::npos) << Describe(s);
    ExpectNoServerPath(s);
    ASSERT_EQ(HealthStatus(), 1) << "the server must still answer";
  }
  v1::ListDatasetsResponse listed;
  ASSERT_TRUE(datasets_->ListDatasets(Ctx(alice).get(), {}, &listed).ok());
  EXPECT_EQ(listed.datasets_size(), 0);
  v1::Dataset dataset;
  grpc::Status s = Upload(alice, "good", "Ele_good.h5", GoodFile(), &dataset);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(dataset.events(), 6);
  EXPECT_EQ(dataset.particle(), v1::PARTICLE_ELECTRON);
}

TEST_F(ServerHostileUploadTest, AnInspectionChildThatDiesOrMisbehavesCostsOnlyTheChild) {
  ASSERT_EQ(StopServer(), 0);
  std::vector<std::string> extra = {std::string("--inspect-binary=") + GANTRY_MISBEHAVING_INSPECTOR,
                                    "--inspect-timeout-ms=1500", "--inspect-memory-mb=256"};
  StartServer(extra);
  const pid_t server_pid = server_->pid();
  const std::string alice = NewTenant("alice");
  struct Case {
    std::string mode, fragment;
  };
  const std::vector<Case> cases = {
      {"MODE:alloc", "could not be read as HDF5"},
      {"MODE:segv", "crashed"},
      {"MODE:spin", "time limit"},
      {"MODE:sleep", "time limit"},
      {"MODE:flood", "more output than allowed"},
      {"MODE:lies", "no usable answer"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mode);
    const auto start = std::chrono::steady_clock::now();
    grpc::Status s = Upload(alice, "bad-" + std::to_string(n++), "Pi0_upload.h5", c.mode + "\n");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
    EXPECT_NE(s.error_message().find("the uploaded file \"Pi0_upload.h5\""), std::string::npos)
        << Describe(s);
    EXPECT_NE(s.error_message().find(c.fragment), std::string::npos) << Describe(s);
    ExpectNoServerPath(s);
    EXPECT_LT(seconds, 10.0);
    ASSERT_EQ(HealthStatus(), 1);
    EXPECT_EQ(server_->pid(), server_pid);
  }
  // What the child sees: no network (its own namespace), only descriptors 0-3, no environment.
  const std::string port = server_->address().substr(server_->address().rfind(':') + 1);
  grpc::Status s = Upload(alice, "probe", "probe.h5", "MODE:probe:" + port + "\n");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("net=unreachable"), std::string::npos) << Describe(s);
  EXPECT_NE(s.error_message().find("fds=0,1,2,3 "), std::string::npos) << Describe(s);
  EXPECT_NE(s.error_message().find("env=0"), std::string::npos) << Describe(s);
  v1::ListDatasetsResponse listed;
  ASSERT_TRUE(datasets_->ListDatasets(Ctx(alice).get(), {}, &listed).ok());
  EXPECT_EQ(listed.datasets_size(), 0);
}

// An upload pins its blob, is inspected, then records its dataset. When the inspection outlasts
// the collector's grace period the collector deletes the still unreferenced bytes; the upload
// must then fail (ABORTED, upload again), never record a dataset whose bytes are gone. A quick
// inspection under the same collector records one that reads back whole.
TEST_F(ServerHostileUploadTest, AnInspectionLongerThanTheBlobGraceRecordsNoDatasetWithoutBytes) {
  ASSERT_EQ(StopServer(), 0);
  StartServer({std::string("--inspect-binary=") + GANTRY_MISBEHAVING_INSPECTOR,
               "--inspect-timeout-ms=10000", "--blob-gc-interval-ms=50",
               "--blob-gc-grace-ms=1000"});
  const std::string alice = NewTenant("alice");

  grpc::Status slow = Upload(alice, "slow", "Ele_slow.h5", "MODE:slow:3000\n");
  EXPECT_EQ(slow.error_code(), grpc::StatusCode::ABORTED) << Describe(slow);
  EXPECT_NE(slow.error_message().find("--blob-gc-grace-ms"), std::string::npos) << Describe(slow);
  EXPECT_NE(slow.error_message().find("upload the file again"), std::string::npos)
      << Describe(slow);
  ExpectNoServerPath(slow);
  v1::ListDatasetsResponse listed;
  ASSERT_TRUE(datasets_->ListDatasets(Ctx(alice).get(), {}, &listed).ok());
  EXPECT_EQ(listed.datasets_size(), 0) << listed.DebugString();

  const std::string bytes = "MODE:slow:0\n";
  v1::Dataset quick;
  grpc::Status s = Upload(alice, "quick", "Ele_quick.h5", bytes, &quick);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(quick.events(), 6);
  absl::SleepFor(absl::Milliseconds(2500));  // collector passes over two grace periods
  v1::ReadDatasetRequest read;
  read.set_dataset_id(quick.id());
  auto ctx = Ctx(alice, 30000);
  auto reader = datasets_->ReadDataset(ctx.get(), read);
  std::string back;
  v1::DatasetChunk chunk;
  while (reader->Read(&chunk)) back += chunk.data();
  grpc::Status finished = reader->Finish();
  ASSERT_TRUE(finished.ok()) << Describe(finished);
  EXPECT_EQ(back, bytes);
}

TEST_F(ServerHostileUploadTest, AMissingHelperRefusesToStartTheServer) {
  ASSERT_EQ(StopServer(), 0);
  std::vector<std::string> args = StandardArgs();
  args.push_back("--inspect-binary=" + dir_.File("no-such-helper"));
  std::string output;
  EXPECT_EQ(ServerProcess::RunToExit(args, &output), 2);
  EXPECT_NE(output.find("--inspect-binary"), std::string::npos) << output;
  for (const char* bad : {"--inspect-concurrency=0", "--inspect-concurrency=5000"}) {
    args = StandardArgs();
    args.push_back(bad);
    EXPECT_EQ(ServerProcess::RunToExit(args, &output), 2) << bad;
    EXPECT_NE(output.find("--inspect-concurrency"), std::string::npos) << output;
  }
  StartServer();
}

// The inspections running at once are capped server-wide: with a cap of one, an upload that
// arrives while another's inspection hangs waits queue_wait and is UNAVAILABLE, naming the flag;
// once the hung child is ended by its timeout, the next inspection runs.
TEST(SandboxedInspectorCapTest, InspectionsBeyondTheCapWaitThenAreUnavailable) {
  TempDir dir;
  const std::string sleeper = dir.File("sleep.h5"), liar = dir.File("lies.h5");
  std::ofstream(sleeper) << "MODE:sleep\n";
  std::ofstream(liar) << "MODE:lies\n";
  showers::InspectorOptions options;
  options.binary = GANTRY_MISBEHAVING_INSPECTOR;
  options.timeout = absl::Seconds(3);
  options.max_concurrent = 1;
  options.queue_wait = absl::Milliseconds(500);
  // ASan's runtime reserves terabytes of address space up front: no address-space limit under it.
  if (kAddressSanitizer) options.limits.address_space_bytes = 0;
  const showers::SandboxedInspector inspector(options);
  auto hung = std::async(std::launch::async,
                         [&] { return inspector.Inspect(sleeper, "hung.h5").status(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the hung child is running
  const auto start = std::chrono::steady_clock::now();
  const absl::Status refused = inspector.Inspect(liar, "second.h5").status();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_NE(refused.message().find("--inspect-concurrency"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("\"second.h5\""), std::string::npos) << refused;
  EXPECT_GE(waited, 0.45);
  EXPECT_LT(waited, 2.5);  // refused after its wait, not after the hung child's timeout
  const absl::Status timed_out = hung.get();
  EXPECT_TRUE(absl::IsInvalidArgument(timed_out)) << timed_out;
  EXPECT_NE(timed_out.message().find("time limit"), std::string::npos) << timed_out;
  // The slot is free again: the next file is inspected (and refused for what it is).
  const absl::Status inspected = inspector.Inspect(liar, "third.h5").status();
  EXPECT_TRUE(absl::IsInvalidArgument(inspected)) << inspected;
  EXPECT_NE(inspected.message().find("no usable answer"), std::string::npos) << inspected;
}

}  // namespace
}  // namespace gantry::testing
