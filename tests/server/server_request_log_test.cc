// Request ids and the per-call log line against the real gantry-server: the id a client sends
// comes back in the response metadata and names the call's log line; failed calls are always
// logged, successful ones at --log-sample-rate (1: all, 0: none, 0.5: about half); JSON lines parse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "tests/server/server_fixture.h"
#include "tests/server/server_process.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

std::string MetadataValue(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                          const std::string& key) {
  const auto it = metadata.find(key);
  return it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
}

// The server's log lines that mention `needle`.
std::vector<std::string> LinesWith(const std::string& log, const std::string& needle) {
  std::vector<std::string> found;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (line.find(needle) != absl::string_view::npos) found.emplace_back(line);
  }
  return found;
}

class ServerRequestLogTest : public ServerFixture {
 protected:
  // GetModel of a model that does not exist (NOT_FOUND) with `request_id` ("" = none sent);
  // returns the id the server sent back in the trailing metadata.
  std::string FailingCall(const std::string& token, const std::string& request_id) {
    auto ctx = Ctx(token);
    if (!request_id.empty()) ctx->AddMetadata("x-request-id", request_id);
    v1::GetModelRequest request;
    request.set_model("no-such-model:1");
    v1::ModelVersion model;
    const grpc::Status status = catalog_->GetModel(ctx.get(), request, &model);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(status);
    EXPECT_EQ(MetadataValue(ctx->GetServerInitialMetadata(), "x-request-id"),
              MetadataValue(ctx->GetServerTrailingMetadata(), "x-request-id"));
    return MetadataValue(ctx->GetServerTrailingMetadata(), "x-request-id");
  }
  // ListModels (OK) with `request_id`; returns the id sent back.
  std::string SuccessfulCall(const std::string& token, const std::string& request_id) {
    auto ctx = Ctx(token);
    ctx->AddMetadata("x-request-id", request_id);
    v1::ListModelsRequest request;
    v1::ListModelsResponse response;
    const grpc::Status status = catalog_->ListModels(ctx.get(), request, &response);
    EXPECT_TRUE(status.ok()) << Describe(status);
    return MetadataValue(ctx->GetServerTrailingMetadata(), "x-request-id");
  }
};

TEST_F(ServerRequestLogTest, FailedCallIsLoggedWithTheClientsRequestIdWhichComesBack) {
  StartServer({"--log-sample-rate=0"});
  const std::string token = NewTenant("loggers");
  EXPECT_EQ(FailingCall(token, "req-from-client-42"), "req-from-client-42");
  const std::vector<std::string> lines =
      LinesWith(server_->Stderr(), "request_id=req-from-client-42");
  ASSERT_EQ(lines.size(), 1u) << server_->Stderr();
  EXPECT_NE(lines[0].find(" W gantry-server "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("method=/gantry.v1.CatalogService/GetModel"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("code=NOT_FOUND"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("tenant=loggers"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("duration_ms="), std::string::npos) << lines[0];

  // No id (or an implausible one): the server makes one, returns it and logs it.
  const std::string made = FailingCall(token, "");
  ASSERT_EQ(made.size(), 16u) << made;
  EXPECT_EQ(LinesWith(server_->Stderr(), "request_id=" + made).size(), 1u) << server_->Stderr();
  const std::string replaced = FailingCall(token, "bad id with spaces");
  EXPECT_EQ(replaced.size(), 16u) << replaced;
  EXPECT_EQ(LinesWith(server_->Stderr(), "bad id with spaces").size(), 0u);
}

TEST_F(ServerRequestLogTest, SuccessfulCallsAreSampled) {
  StartServer({"--log-sample-rate=0"});
  std::string token = NewTenant("sampled");
  EXPECT_EQ(SuccessfulCall(token, "ok-at-rate-0"), "ok-at-rate-0");
  EXPECT_TRUE(LinesWith(server_->Stderr(), "ok-at-rate-0").empty()) << server_->Stderr();

  StartServer({"--log-sample-rate=1"});
  for (int i = 0; i < 3; ++i) {
    const std::string id = "ok-at-rate-1-" + std::to_string(i);
    EXPECT_EQ(SuccessfulCall(token, id), id);
    const std::vector<std::string> lines = LinesWith(server_->Stderr(), "request_id=" + id);
    ASSERT_EQ(lines.size(), 1u) << server_->Stderr();
    EXPECT_NE(lines[0].find(" I gantry-server "), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("code=OK"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("method=/gantry.v1.CatalogService/ListModels"), std::string::npos)
        << lines[0];
  }
}

TEST_F(ServerRequestLogTest, AHalfRateLogsAboutHalfOfTheSuccesses) {
  StartServer({"--log-sample-rate=0.5"});
  const std::string token = NewTenant("halves");
  constexpr int kCalls = 200;
  for (int i = 0; i < kCalls; ++i) SuccessfulCall(token, "half-" + std::to_string(i));
  const size_t logged = LinesWith(server_->Stderr(), "request_id=half-").size();
  // Binomial(200, 0.5): standard deviation about 7; these bounds are 5.6 of them away.
  EXPECT_GT(logged, 60u);
  EXPECT_LT(logged, 140u);
}

TEST_F(ServerRequestLogTest, JsonLinesCarryTheRequestFields) {
  StartServer({"--log-format=json", "--log-sample-rate=1"});
  const std::string token = NewTenant("jsonlogs");
  EXPECT_EQ(FailingCall(token, "json-req-1"), "json-req-1");
  const std::vector<std::string> lines = LinesWith(server_->Stderr(), "json-req-1");
  ASSERT_EQ(lines.size(), 1u) << server_->Stderr();
  google::protobuf::Struct line;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[0], &line).ok()) << lines[0];
  const auto& f = line.fields();
  EXPECT_EQ(f.at("level").string_value(), "warning");
  EXPECT_EQ(f.at("program").string_value(), "gantry-server");
  EXPECT_EQ(f.at("request_id").string_value(), "json-req-1");
  EXPECT_EQ(f.at("code").string_value(), "NOT_FOUND");
  EXPECT_EQ(f.at("tenant").string_value(), "jsonlogs");
  EXPECT_EQ(f.at("method").string_value(), "/gantry.v1.CatalogService/GetModel");
  // The JSON server's other lines are JSON too, its start-up line included (the log file also
  // holds the lines of the fixture's first, text-format server, which stops meanwhile).
  int json_lines = 0;
  bool startup_line = false;
  for (absl::string_view text : absl::StrSplit(server_->Stderr(), '\n', absl::SkipEmpty())) {
    if (text.front() != '{') continue;
    google::protobuf::Struct parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(text), &parsed).ok())
        << text;
    ++json_lines;
    const std::string& msg = parsed.fields().at("msg").string_value();
    if (msg.find("migration(s) applied") != std::string::npos) startup_line = true;
  }
  EXPECT_GE(json_lines, 3) << server_->Stderr();
  EXPECT_TRUE(startup_line) << server_->Stderr();
}

TEST_F(ServerRequestLogTest, BadLoggingFlagsAreUsageErrors) {
  for (const std::string& bad : {"--log-level=loud", "--log-format=xml", "--log-sample-rate=2"}) {
    std::vector<std::string> args = StandardArgs();
    args.push_back(bad);
    std::string output;
    EXPECT_EQ(ServerProcess::RunToExit(args, &output), 2) << bad << ": " << output;
    EXPECT_NE(output.find(bad.substr(0, bad.find('='))), std::string::npos) << output;
  }
}

}  // namespace
}  // namespace gantry::testing
