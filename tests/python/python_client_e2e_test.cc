// End to end for the gantry-client Python package: a real gantry-server on a fresh PostgreSQL
// database and one real gantry-worker daemon; the wheel built by the gantry_python_package target
// is installed offline into a fresh virtual environment, and client_e2e.py runs from that
// environment against the server: upload with progress, submit + watch (resuming through a TCP
// proxy that drops the connection, and after the client closes the stream), models, generate into
// an array and into HDF5, and refusals mapped to typed exceptions.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

class PythonClientE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    const std::string join_token_file = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file, "python-e2e-join-token-0123456789abcdef\n");
    StartServer({"--join-token-file", join_token_file, "--heartbeat-interval-ms", "300"});
    token_ = NewTenant("physics");
    worker_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{GANTRY_WORKER_BINARY, "daemon", "--server=" + server_->address(),
                                 "--join-token-file=" + join_token_file, "--name=py-worker",
                                 "--slots=1", "--threads=1", "--cache-dir=" + dir_.path() + "/wc",
                                 "--advertise-host=127.0.0.1", "--rendezvous-ports=29920-29939"},
        dir_.path() + "/worker.log");
    ASSERT_GT(worker_->pid(), 0);
  }

  void TearDown() override {
    worker_.reset();
    ServerFixture::TearDown();
  }

  std::string token_;
  std::unique_ptr<ChildProcess> worker_;
};

TEST_F(PythonClientE2eTest, HelpersFromAFreshVenv) {
  // A fresh venv on Debian's python3, the wheel installed offline (no index).
  const std::string venv = dir_.path() + "/venv";
  CommandResult made = ChildProcess::Run(
      {GANTRY_VENV_PYTHON3, "-m", "venv", "--system-site-packages", venv}, {}, dir_.path(), 120);
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  CommandResult installed =
      ChildProcess::Run({venv + "/bin/pip", "install", "--no-build-isolation", "--no-index",
                         "--disable-pip-version-check", "--quiet", GANTRY_PY_WHEEL},
                        {{"PIP_CONFIG_FILE", "/dev/null"}}, dir_.path(), 120);
  ASSERT_EQ(installed.exit_code, 0) << installed.out << installed.err;

  CommandResult run = ChildProcess::Run({venv + "/bin/python", GANTRY_PY_E2E_SCRIPT, "-v"},
                                        {{"GANTRY_SERVER", server_->address()},
                                         {"GANTRY_TOKEN", token_},
                                         {"GANTRY_CA_CERT", std::nullopt},
                                         {"GANTRY_CONFIG", std::nullopt},
                                         {"PYTHONPATH", std::nullopt},
                                         {"HOME", dir_.path()},
                                         {"GANTRY_E2E_DIR", dir_.path()}},
                                        dir_.path(), 240);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err << "\n--- worker log:\n"
                              << worker_->Log() << "\n--- server log:\n"
                              << server_->Stderr();
  // Every step ran (unittest -v names each test and its result).
  for (const char* step : {"test_1_errors", "test_2_upload", "test_3_submit_watch_resume",
                           "test_4_models", "test_5_generate", "test_6_study"}) {
    EXPECT_NE(run.err.find(std::string(step) + " "), std::string::npos) << step << "\n" << run.err;
  }
  EXPECT_NE(run.err.find("\nOK"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace gantry::testing
