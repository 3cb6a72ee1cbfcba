// CatalogService.ExportModel through the real gantry-server and PostgreSQL, with
// FakeGenerationWorkers hosted here (real gRPC on loopback) as the workers: the request the worker
// gets, the stream the client gets, and a hostile worker's stream (wrong sha256 or size, a huge
// declared size or message, data before the metadata), which never reaches the client complete.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/sha256.h"
#include "tests/server/generation_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using ExportMode = FakeGenerationWorker::ExportMode;

struct Exported {
  grpc::Status status;
  std::vector<v1::ExportModelChunk> chunks;
  std::string worker;  // initial metadata gantry-worker
  // The data of every chunk after the metadata, concatenated.
  std::string Bytes() const {
    std::string all;
    for (const auto& c : chunks) all += c.data();
    return all;
  }
};

class ServerExportTest : public GenerationFixture {
 protected:
  Exported Export(const std::string& token, const std::string& model, v1::ExportFormat format,
                  v1::ExportProfile profile = v1::EXPORT_PROFILE_UNSPECIFIED) {
    v1::ExportModelRequest request;
    request.set_model(model);
    request.set_format(format);
    request.set_profile(profile);
    Exported e;
    auto ctx = Ctx(token, 20000);
    auto reader = catalog_->ExportModel(ctx.get(), request);
    v1::ExportModelChunk chunk;
    while (reader->Read(&chunk)) e.chunks.push_back(chunk);
    e.status = reader->Finish();
    e.worker = MetadataValue(ctx->GetServerInitialMetadata(), "gantry-worker");
    return e;
  }
};

TEST_F(ServerExportTest, StreamsTheWorkersExportWithTheServersMetadata) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  Exported e = Export(token_, "calo@prod", v1::EXPORT_FORMAT_PYTORCH);
  ASSERT_TRUE(e.status.ok()) << Describe(e.status);
  EXPECT_EQ(e.worker, "alpha");
  EXPECT_EQ(alpha.fake->last_authorization(), "Bearer alpha-secret-0123456789");
  const v1::WorkerExportRequest sent = alpha.fake->last_export_request();
  EXPECT_EQ(sent.format(), v1::EXPORT_FORMAT_PYTORCH);
  EXPECT_EQ(sent.profile(), v1::EXPORT_PROFILE_GANTRY) << "an unset profile goes out as gantry";
  EXPECT_EQ(sent.model().checkpoint_sha256(), sha_);
  EXPECT_EQ(sent.model().checkpoint_size_bytes(), 3000);
  EXPECT_EQ(sent.model().model_ref(), "calo:1");

  const std::string payload = FakeGenerationWorker::ExportPayload();
  ASSERT_EQ(e.chunks.size(), 4u);  // metadata + 2.5 MiB in 1 MiB chunks
  ASSERT_TRUE(e.chunks[0].has_metadata());
  const v1::ExportMetadata& m = e.chunks[0].metadata();
  EXPECT_EQ(m.format(), v1::EXPORT_FORMAT_PYTORCH);
  EXPECT_EQ(m.size_bytes(), static_cast<int64_t>(payload.size()));
  EXPECT_EQ(m.sha256(), Sha256Hex(payload));
  EXPECT_EQ(m.model_ref(), "calo:1");  // the server's, not what the worker wrote
  EXPECT_EQ(m.checkpoint_sha256(), sha_);
  ASSERT_EQ(m.inputs_size(), 1);
  EXPECT_EQ(m.inputs(0).name(), "latent");
  int64_t offset = 0;
  for (size_t i = 1; i < e.chunks.size(); ++i) {
    EXPECT_EQ(e.chunks[i].offset(), offset);
    offset += static_cast<int64_t>(e.chunks[i].data().size());
  }
  EXPECT_EQ(e.Bytes(), payload);

  // A profile goes to the worker as asked, and comes back in the metadata.
  e = Export(token_, "calo:1", v1::EXPORT_FORMAT_ONNX, v1::EXPORT_PROFILE_PAR04);
  ASSERT_TRUE(e.status.ok()) << Describe(e.status);
  EXPECT_EQ(alpha.fake->last_export_request().profile(), v1::EXPORT_PROFILE_PAR04);
  EXPECT_EQ(e.chunks[0].metadata().profile(), v1::EXPORT_PROFILE_PAR04);
}

TEST_F(ServerExportTest, AHostileWorkersStreamNeverReachesTheClientComplete) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  const int64_t size = static_cast<int64_t>(FakeGenerationWorker::ExportPayload().size());
  struct Case {
    ExportMode mode;
    grpc::StatusCode code;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {ExportMode::kWrongSha256, grpc::StatusCode::DATA_LOSS, "do not match the declared"},
           {ExportMode::kLessThanDeclared, grpc::StatusCode::DATA_LOSS,
            "do not match the declared"},
           {ExportMode::kMoreThanDeclared, grpc::StatusCode::INTERNAL, "malformed data chunk"},
           {ExportMode::kTooLarge, grpc::StatusCode::INTERNAL, "are accepted for this checkpoint"},
           {ExportMode::kDataFirst, grpc::StatusCode::INTERNAL, "data before the metadata"},
           {ExportMode::kHugeChunk, grpc::StatusCode::RESOURCE_EXHAUSTED, "worker alpha"}}) {
    SCOPED_TRACE(static_cast<int>(c.mode));
    alpha.fake->set_export_mode(c.mode);
    Exported e = Export(token_, "calo:1", v1::EXPORT_FORMAT_ONNX);
    EXPECT_EQ(e.status.error_code(), c.code) << Describe(e.status);
    EXPECT_NE(e.status.error_message().find(c.message), std::string::npos)
        << e.status.error_message();
    // Whatever arrived is short of the file: the last chunk is held back until it is verified.
    EXPECT_LT(static_cast<int64_t>(e.Bytes().size()), size);
  }
  // The server is fine afterwards.
  alpha.fake->set_export_mode(ExportMode::kServe);
  EXPECT_TRUE(Export(token_, "calo:1", v1::EXPORT_FORMAT_ONNX).status.ok());
}

TEST_F(ServerExportTest, ATokenRevokedDuringTheExportGetsNoCompleteFile) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  alpha.fake->set_export_mode(ExportMode::kSlow);
  v1::CreateTokenRequest create;
  create.set_tenant("physics");
  v1::CreateTokenResponse issued;
  ASSERT_TRUE(admin_->CreateToken(Ctx(admin_token_).get(), create, &issued).ok());
  v1::ExportModelRequest request;
  request.set_model("calo:1");
  request.set_format(v1::EXPORT_FORMAT_ONNX);
  auto ctx = Ctx(issued.token(), 20000);
  auto reader = catalog_->ExportModel(ctx.get(), request);
  v1::ExportModelChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  ASSERT_TRUE(chunk.has_metadata());
  v1::RevokeTokenRequest revoke;
  revoke.set_token_id(issued.token_id());
  v1::RevokeTokenResponse revoked;
  ASSERT_TRUE(admin_->RevokeToken(Ctx(admin_token_).get(), revoke, &revoked).ok());
  int64_t bytes = 0;
  while (reader->Read(&chunk)) bytes += static_cast<int64_t>(chunk.data().size());
  const grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_LT(bytes, static_cast<int64_t>(FakeGenerationWorker::ExportPayload().size()));
}

TEST_F(ServerExportTest, RefusesBeforeAnyWorkerIsAsked) {
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  const std::string other = NewTenant("other");
  Exported hidden = Export(other, "calo:1", v1::EXPORT_FORMAT_ONNX);
  EXPECT_EQ(hidden.status.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(hidden.status);
  Exported unspecified = Export(token_, "calo:1", v1::EXPORT_FORMAT_UNSPECIFIED);
  EXPECT_EQ(unspecified.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unspecified.status.error_message().find(
                "format: EXPORT_FORMAT_UNSPECIFIED is not an export format; use "
                "EXPORT_FORMAT_ONNX, EXPORT_FORMAT_PYTORCH or EXPORT_FORMAT_TORCHSCRIPT"),
            std::string::npos)
      << unspecified.status.error_message();
  Exported unknown = Export(token_, "calo:1", static_cast<v1::ExportFormat>(9));
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unknown.status.error_message().find("format: 9 is not"), std::string::npos);
  Exported bad_ref = Export(token_, "calo", v1::EXPORT_FORMAT_ONNX);
  EXPECT_EQ(bad_ref.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A profile in a format that does not write it; a variable-angle model in the ddml profile.
  Exported ddml_onnx = Export(token_, "calo:1", v1::EXPORT_FORMAT_ONNX, v1::EXPORT_PROFILE_DDML);
  EXPECT_EQ(ddml_onnx.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(ddml_onnx.status.error_message().find("give format torchscript"), std::string::npos)
      << ddml_onnx.status.error_message();
  RegisterModel(token_, "angled", std::string(3000, 'a'), /*variable_angle=*/true);
  Exported angled =
      Export(token_, "angled:1", v1::EXPORT_FORMAT_TORCHSCRIPT, v1::EXPORT_PROFILE_DDML);
  EXPECT_EQ(angled.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(angled.status.error_message().find("angled:1: profile ddml has no angle input"),
            std::string::npos)
      << angled.status.error_message();
  EXPECT_EQ(alpha.fake->export_calls(), 0);
}

TEST_F(ServerExportTest, WithoutAServingWorkerItIsUnavailable) {
  Exported e = Export(token_, "calo:1", v1::EXPORT_FORMAT_ONNX);
  EXPECT_EQ(e.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(e.status.error_message().find("no worker can serve the export"), std::string::npos)
      << e.status.error_message();
}

}  // namespace
}  // namespace gantry::testing
