// Tests of base/grpc_status: the one conversion between grpc::Status and absl::Status.
#include "base/grpc_status.h"

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
    EXPECT_EQ(FromGrpcStatus(wire), original);
  }
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

TEST(ToGrpcStatusTest, CutsHugeMessagesSoTheCodeSurvivesTheMetadataLimit) {
  const std::string value(100000, 'x');
  grpc::Status s = ToGrpcStatus(absl::InvalidArgumentError("alias \"" + value + "\" is invalid"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(s.error_message().size(), kMaxStatusMessageBytes);
  EXPECT_EQ(s.error_message().rfind("alias \"xxx", 0), 0u) << s.error_message().substr(0, 40);
  EXPECT_NE(s.error_message().find("bytes cut)"), std::string::npos);
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
