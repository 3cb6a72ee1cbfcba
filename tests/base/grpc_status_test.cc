// Tests of base/grpc_status: the one conversion between grpc::Status and absl::Status.
#include "base/grpc_status.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_details.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"

namespace gantry {
namespace {

TEST(GrpcStatusTest, OkStaysOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "context").ok());
}

TEST(GrpcStatusTest, EveryCodeAndMessageSurviveARoundTrip) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status original(static_cast<absl::StatusCode>(code), "what to change");
    const grpc::Status wire = ToGrpcStatus(original);
    EXPECT_EQ(static_cast<int>(wire.error_code()), code);
    EXPECT_EQ(wire.error_message(), "what to change");
    const absl::Status back = FromGrpcStatus(wire);
    EXPECT_EQ(back.code(), original.code());
    EXPECT_EQ(back.message(), original.message());
  }
}

TEST(GrpcStatusTest, DetailsCrossTheWireAsGoogleRpcStatus) {
  absl::Status original = absl::InvalidArgumentError("spec.epochs: must be in [1, 10000]");
  original = AddFieldViolation(original, "spec.epochs", "must be in [1, 10000]");
  original = AddFieldViolation(original, "spec.world_size", "must be >= 1");
  original = SetErrorReason(original, "INVALID_FIELD", {{"limit", "10000"}});
  const grpc::Status wire = ToGrpcStatus(original);
  // The trailer is a google.rpc.Status with the same code and message.
  google::rpc::Status rpc;
  ASSERT_TRUE(rpc.ParseFromString(wire.error_details()));
  EXPECT_EQ(rpc.code(), 3);
  EXPECT_EQ(rpc.message(), "spec.epochs: must be in [1, 10000]");
  google::rpc::BadRequest bad;
  bool found = false;
  for (const auto& any : rpc.details()) {
    if (any.Is<google::rpc::BadRequest>()) found = any.UnpackTo(&bad);
  }
  ASSERT_TRUE(found);
  ASSERT_EQ(bad.field_violations_size(), 2);
  EXPECT_EQ(bad.field_violations(1).field(), "spec.world_size");

  const StatusDetails back = GetStatusDetails(FromGrpcStatus(wire, "submitting"));
  ASSERT_EQ(back.field_violations.size(), 2u);
  EXPECT_EQ(back.field_violations[0].field, "spec.epochs");
  EXPECT_EQ(back.field_violations[0].description, "must be in [1, 10000]");
  EXPECT_EQ(back.reason, "INVALID_FIELD");
  EXPECT_EQ(back.domain, "gantry");
  EXPECT_EQ(back.metadata.at("limit"), "10000");
  EXPECT_FALSE(back.retry_delay.has_value());
}

TEST(GrpcStatusTest, EveryErrorGetsAReasonAndRetryableOnesARetryHint) {
  const StatusDetails missing =
      GetStatusDetails(FromGrpcStatus(ToGrpcStatus(absl::NotFoundError("x"))));
  EXPECT_EQ(missing.reason, "NOT_FOUND");
  EXPECT_FALSE(missing.retry_delay.has_value());
  const StatusDetails down =
      GetStatusDetails(FromGrpcStatus(ToGrpcStatus(absl::UnavailableError("no worker"))));
  EXPECT_EQ(down.reason, "UNAVAILABLE");
  ASSERT_TRUE(down.retry_delay.has_value());
  EXPECT_EQ(*down.retry_delay, absl::Seconds(1));
  const absl::Status later =
      SetRetryDelay(absl::ResourceExhaustedError("quota"), absl::Milliseconds(2500));
  const StatusDetails quota = GetStatusDetails(FromGrpcStatus(ToGrpcStatus(later)));
  ASSERT_TRUE(quota.retry_delay.has_value());
  EXPECT_EQ(*quota.retry_delay, absl::Milliseconds(2500));
  EXPECT_EQ(DescribeStatusDetails(FromGrpcStatus(ToGrpcStatus(later))),
            std::vector<std::string>({"  retry after 2.5s"}));
}

TEST(GrpcStatusTest, DetailsAreBoundedAndHostileTrailersIgnored) {
  absl::Status many = absl::InvalidArgumentError("many");
  for (int i = 0; i < 40; ++i) {
    many = AddFieldViolation(many, absl::StrCat("f", i), std::string(5000, 'x'));
  }
  const StatusDetails bounded = GetStatusDetails(many);
  EXPECT_EQ(bounded.field_violations.size(), kMaxFieldViolations);
  EXPECT_LE(bounded.field_violations[0].description.size(), kMaxDetailBytes);
  EXPECT_LT(ToGrpcStatus(many).error_details().size(), 16u << 10);

  const absl::Status garbage =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "boom", "\xff\xff\x01garbage"));
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(garbage.message(), "boom");
  EXPECT_TRUE(GetStatusDetails(garbage).field_violations.empty());
  EXPECT_TRUE(GetStatusDetails(garbage).reason.empty());

  google::rpc::Status huge;
  huge.set_code(13);
  google::rpc::ErrorInfo info;
  info.set_reason(std::string(100 << 10, 'R'));
  huge.add_details()->PackFrom(info);
  const absl::Status ignored =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "big", huge.SerializeAsString()));
  EXPECT_TRUE(GetStatusDetails(ignored).reason.empty()) << "a 100 KiB trailer is ignored";
}

TEST(GrpcStatusTest, OkIgnoresDetails) {
  EXPECT_TRUE(AddFieldViolation(absl::OkStatus(), "f", "d").ok());
  EXPECT_TRUE(SetErrorReason(absl::OkStatus(), "R").ok());
  EXPECT_TRUE(GetStatusDetails(absl::OkStatus()).field_violations.empty());
}

TEST(GrpcStatusTest, UnknownCodesBecomeUnknown) {
  const grpc::Status wire = ToGrpcStatus(absl::Status(static_cast<absl::StatusCode>(42), "odd"));
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(wire.error_message(), "odd");
  // grpc::StatusCode has no fixed underlying type, so only values up to 31 are valid enum values
  // (99 was undefined behaviour, caught by UBSan); 20 is valid but not a gRPC code.
  const absl::Status back = FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(20), "x"));
  EXPECT_EQ(back.code(), absl::StatusCode::kUnknown);
}

TEST(GrpcStatusTest, ContextPrefixesTheMessageAndKeepsTheCode) {
  const absl::Status s =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "no such dataset"), "ReadDataset");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "ReadDataset: no such dataset");
}

}  // namespace
}  // namespace gantry

namespace gantry {
namespace {

TEST(ToGrpcStatusTest, MessageIsOneLineWithoutControlCharacters) {
  grpc::Status s =
      ToGrpcStatus(absl::NotFoundError("worker \"w1\nE forged line\x1b[2J\" is not registered"));
  EXPECT_EQ(s.error_message(), "worker \"w1\\nE forged line\\x1b[2J\" is not registered");
}

TEST(ToGrpcStatusTest, CutsHugeMessagesSoTheCodeSurvivesTheMetadataLimit) {
  const std::string value(100000, 'x');
  grpc::Status s = ToGrpcStatus(absl::InvalidArgumentError("alias \"" + value + "\" is invalid"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(s.error_message().size(), kMaxStatusMessageBytes);
  EXPECT_EQ(s.error_message().rfind("alias \"xxx", 0), 0u) << s.error_message().substr(0, 40);
  EXPECT_NE(s.error_message().find("more bytes)"), std::string::npos);
  // Never in the middle of a UTF-8 sequence.
  std::string accents;
  for (int i = 0; i < 3000; ++i) accents += "\xc3\xa9";  // é
  grpc::Status u = ToGrpcStatus(absl::InvalidArgumentError(accents));
  const std::string kept = u.error_message().substr(0, u.error_message().find("..."));
  EXPECT_EQ(kept.size() % 2, 0u);
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("short")).error_message(), "short");
}

}  // namespace
}  // namespace gantry
