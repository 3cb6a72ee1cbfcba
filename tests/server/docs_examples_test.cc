// The JobSpec examples in docs/API.md, submitted to a real gantry-server: each must be accepted as
// written (QUEUED), and a copy with world_size 0 must be refused with INVALID_ARGUMENT. An example
// is a ```json block directly after a line `<!-- example: gantry.v1.JobSpec -->`.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"

#ifndef GANTRY_API_DOC
#error "GANTRY_API_DOC (the path of docs/API.md) must be defined"
#endif

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

constexpr char kMarker[] = "<!-- example: gantry.v1.JobSpec -->";

// The bodies of the ```json blocks that follow a marker line.
std::vector<std::string> JobSpecExamples(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<std::string> examples;
  std::string line;
  bool marked = false;
  while (std::getline(in, line)) {
    if (line == kMarker) {
      marked = true;
      continue;
    }
    if (marked) {
      EXPECT_EQ(line, "```json") << path << ": the marker must be followed by a ```json block";
      std::string body;
      while (std::getline(in, line) && line != "```") body += line + "\n";
      examples.push_back(body);
      marked = false;
    }
  }
  return examples;
}

class DocsExamplesTest : public ServerFixture {};

TEST_F(DocsExamplesTest, TheApiJobSpecExamplesAreAcceptedAndABrokenCopyIsRefused) {
  const std::vector<std::string> examples = JobSpecExamples(GANTRY_API_DOC);
  ASSERT_FALSE(examples.empty()) << GANTRY_API_DOC << " has no line " << kMarker;
  const std::string token = NewTenant("docs-team");
  for (const std::string& json : examples) {
    SCOPED_TRACE(json);
    v1::JobSpec spec;
    const auto parsed = google::protobuf::util::JsonStringToMessage(json, &spec);
    ASSERT_TRUE(parsed.ok()) << parsed.ToString();

    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    v1::Job job;
    grpc::Status s = training_->SubmitJob(Ctx(token).get(), request, &job);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
    EXPECT_EQ(job.reason(), "Submitted");

    request.mutable_spec()->set_world_size(0);
    v1::Job refused;
    s = training_->SubmitJob(Ctx(token).get(), request, &refused);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
    EXPECT_NE(s.error_message().find("spec.world_size"), std::string::npos) << Describe(s);
  }
}

}  // namespace
}  // namespace gantry::testing
