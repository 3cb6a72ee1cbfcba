#include "tests/support/private_postgres.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"

namespace gantry::testing {

PrivatePostgres::PrivatePostgres() {
  // Directly under /tmp (not under a private mkdtemp of the test) so the postgres user can reach
  // it, and short so the socket path stays under the 107-byte limit.
  char pattern[] = "/tmp/gantry-pg-XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    ADD_FAILURE() << "mkdtemp /tmp/gantry-pg-XXXXXX failed";
    return;
  }
  dir_ = pattern;
  chmod(dir_.c_str(), 0755);
  std::string out;
  if (!RunScript("start", &out)) return;
  // pg.sh prints the DSN last.
  std::string trimmed(absl::StripAsciiWhitespace(out));
  const size_t eol = trimmed.rfind('\n');
  dsn_ = eol == std::string::npos ? trimmed : trimmed.substr(eol + 1);
  if (dsn_.find("host=") == std::string::npos) {
    ADD_FAILURE() << "pg.sh start printed no DSN: " << out;
    dsn_.clear();
  }
}

PrivatePostgres::~PrivatePostgres() {
  if (dir_.empty()) return;
  std::string out;
  RunScript("stop", &out);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool PrivatePostgres::Stop() {
  std::string out;
  return RunScript("stop", &out);
}

bool PrivatePostgres::Start() {
  std::string out;
  return RunScript("start", &out);
}

bool PrivatePostgres::RunScript(const std::string& command, std::string* out) {
  const std::string script = GANTRY_PG_SCRIPT;
  CommandResult r = ChildProcess::Run({"/bin/bash", script, command}, {{"GANTRY_PG_DIR", dir_}},
                                      dir_, /*timeout_seconds=*/90);
  *out = r.out;
  if (r.exit_code != 0) {
    ADD_FAILURE() << "pg.sh " << command << " (GANTRY_PG_DIR=" << dir_ << ") exited with "
                  << r.exit_code << ":\n"
                  << r.out << r.err;
    return false;
  }
  return true;
}

}  // namespace gantry::testing
