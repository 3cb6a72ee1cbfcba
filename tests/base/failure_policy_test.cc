// base/failure_policy: the exit code a rank ends with for a status (marked kind first, then the
// status code) and how the server classifies exits.
#include "base/failure_policy.h"

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace gantry {
namespace {

TEST(FailurePolicyTest, ExitCodeByStatusCode) {
  EXPECT_EQ(RankExitCodeFor(absl::OkStatus()), 0);
  EXPECT_EQ(RankExitCodeFor(absl::CancelledError("SIGTERM")), 143);
  EXPECT_EQ(RankExitCodeFor(absl::InvalidArgumentError("spec")), 2);
  EXPECT_EQ(RankExitCodeFor(absl::NotFoundError("dataset")), 3);
  EXPECT_EQ(RankExitCodeFor(absl::FailedPreconditionError("holdout")), 3);
  EXPECT_EQ(RankExitCodeFor(absl::DataLossError("checksum")), 3);
  EXPECT_EQ(RankExitCodeFor(absl::PermissionDeniedError("tenant")), 3);
  EXPECT_EQ(RankExitCodeFor(absl::OutOfRangeError("index")), 3);
  EXPECT_EQ(RankExitCodeFor(absl::ResourceExhaustedError("memory")), 4);
  EXPECT_EQ(RankExitCodeFor(absl::AbortedError("collapse")), 5);
  EXPECT_EQ(RankExitCodeFor(absl::UnavailableError("server")), 204);
  EXPECT_EQ(RankExitCodeFor(absl::DeadlineExceededError("collective")), 202);
  EXPECT_EQ(RankExitCodeFor(absl::InternalError("bug")), 1);
  EXPECT_EQ(RankExitCodeFor(absl::UnknownError("?")), 1);
}

TEST(FailurePolicyTest, AMarkedKindWinsOverTheStatusCode) {
  EXPECT_EQ(RankExitCodeFor(WithExitCode(absl::UnavailableError("gloo: peer"), kExitPeerLost)),
            201);
  EXPECT_EQ(RankExitCodeFor(WithExitCode(absl::CancelledError("checkpointed"), kExitPreempted)),
            200);
  EXPECT_EQ(
      RankExitCodeFor(WithExitCode(absl::InvalidArgumentError("dataset shape"), kExitDataError)),
      3);
  EXPECT_EQ(
      RankExitCodeFor(WithExitCode(absl::DeadlineExceededError("store"), kExitRendezvousFailed)),
      203);
  // Marking keeps code and message; marking OK stays OK.
  const absl::Status marked = WithExitCode(absl::InternalError("x"), kExitCollectiveTimeout);
  EXPECT_EQ(marked.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(marked.message(), "x");
  EXPECT_TRUE(WithExitCode(absl::OkStatus(), kExitPeerLost).ok());
  // A payload that is not an exit code is ignored.
  absl::Status junk = absl::InternalError("y");
  junk.SetPayload(kFailureKindPayload, absl::Cord("not a number"));
  EXPECT_EQ(RankExitCodeFor(junk), 1);
  junk.SetPayload(kFailureKindPayload, absl::Cord("300"));
  EXPECT_EQ(RankExitCodeFor(junk), 1);
}

TEST(FailurePolicyTest, PermanentAndRetryableExits) {
  for (int code : {1, 2, 3, 4, 5, 127}) {
    EXPECT_FALSE(ClassifyRankExit(code).retryable) << code;
    EXPECT_TRUE(ClassifyRankExit(code).counted) << code;
  }
  for (int code : {143, 201, 202, 203, 204, 255, -9, -11}) {
    EXPECT_TRUE(ClassifyRankExit(code).retryable) << code;
    EXPECT_TRUE(ClassifyRankExit(code).counted) << code;
  }
  EXPECT_EQ(ClassifyRankExit(200).reason, "Preempted");
  EXPECT_TRUE(ClassifyRankExit(200).retryable);
  EXPECT_FALSE(ClassifyRankExit(200).counted);
  EXPECT_EQ(ClassifyRankExit(201).reason, "PeerLost");
  EXPECT_EQ(ClassifyRankExit(202).reason, "CollectiveTimeout");
  EXPECT_EQ(ClassifyRankExit(203).reason, "RendezvousFailed");
  EXPECT_EQ(ClassifyRankExit(204).reason, "ServerUnreachable");
  EXPECT_FALSE(Drained().counted);
  EXPECT_FALSE(Preempted().counted);
  EXPECT_TRUE(WorkerLost().retryable);
  EXPECT_EQ(DescribeExitCode(201), "201 (PeerLost, retryable)");
  EXPECT_EQ(DescribeExitCode(3), "3 (DatasetError, permanent)");
  EXPECT_EQ(DescribeExitCode(-9), "signal 9 (retryable)");
}

}  // namespace
}  // namespace gantry
